/*
 * fuzz_admin_command.c - libFuzzer target: the admin console's command
 * grammar (admin_parse_command), fed what a console user may type.
 */
#include "fuzz.h"
#include "admin.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *query = fuzz_cstring(data, size);
	struct admin_command cmd;
	enum admin_parse_result r = admin_parse_command(query, &cmd);

	FUZZ_CHECK(r == ADMIN_PARSE_OK || r == ADMIN_PARSE_INVALID || r == ADMIN_PARSE_TOO_LONG);
	/* Whatever the input, every field stays a terminated string inside its array. */
	FUZZ_CHECK(memchr(cmd.verb, '\0', sizeof(cmd.verb)) != NULL);
	FUZZ_CHECK(memchr(cmd.arg, '\0', sizeof(cmd.arg)) != NULL);
	FUZZ_CHECK(memchr(cmd.key, '\0', sizeof(cmd.key)) != NULL);
	FUZZ_CHECK(memchr(cmd.value, '\0', sizeof(cmd.value)) != NULL);
	if (r == ADMIN_PARSE_OK && !cmd.is_set)
		FUZZ_CHECK(cmd.verb[0] != '\0');
	free(query);
	return 0;
}
