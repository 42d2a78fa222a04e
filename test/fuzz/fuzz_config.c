/*
 * fuzz_config.c - libFuzzer target: a pgbouncer.ini, through the whole
 * loader (sections, key = value, the parameter table, [databases]
 * connection strings, [users], [peers]).
 *
 * %include opens a file by name; inputs with it are skipped, so the target
 * never reads whatever file the fuzzer spells (or blocks on a FIFO).
 */
#include "fuzz.h"
#include "config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstring(data, size);
	struct config *cfg = NULL;
	struct config_error err;

	if (strstr(text, "%include")) {
		free(text);
		return 0;
	}
	memset(&err, 0, sizeof(err));
	if (config_load_string(text, "pgbouncer.ini", &cfg, &err) == 0) {
		/* Every parameter formats back, as SHOW CONFIG does. */
		size_t count = 0;
		const struct param_def *params = config_params(&count);
		char buf[4096];
		FUZZ_CHECK(cfg != NULL);
		for (size_t i = 0; i < count; i++)
			config_format_value(cfg, &params[i], buf, sizeof(buf));
		config_free(cfg);
	} else {
		FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
	}
	free(text);
	return 0;
}
