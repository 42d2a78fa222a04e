/*
 * fuzz.h - what every libFuzzer target in test/fuzz/ shares: silent logging
 * (the parsers warn on every bad line; writing that out would cost more than
 * the parsing) and NUL-terminated copies of the input, since the text
 * parsers take C strings. A broken invariant aborts, which libFuzzer
 * reports as a crash with the input that caused it.
 */
#ifndef PGVALVE_TEST_FUZZ_H
#define PGVALVE_TEST_FUZZ_H

#include "common.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); abort(); } } while (0)

/* No stderr, no file: log lines are formatted (so their code runs) and dropped. */
static inline void fuzz_quiet_log(void)
{
	struct log_settings ls = { .logfile = "", .to_stderr = false };
	if (log_setup(&ls) != 0)
		abort();
}

/* A malloc'd copy of data[0..size) with a NUL after it: exactly size + 1 bytes, so ASan sees overreads. */
static inline char *fuzz_cstring(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/*
 * Splits data at the first '\n' into two messages (the second may be empty),
 * for targets that take an exchange of two messages.
 */
static inline void fuzz_split(const uint8_t *data, size_t size, size_t *first_len, const uint8_t **second,
			      size_t *second_len)
{
	const uint8_t *nl = size ? memchr(data, '\n', size) : NULL;
	*first_len = nl ? (size_t)(nl - data) : size;
	*second = nl ? nl + 1 : data + size;
	*second_len = size - (size_t)(*second - data);
}

#endif
