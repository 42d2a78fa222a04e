/*
 * fuzz_ident.c - libFuzzer target: an auth_ident_file (regexes included),
 * parsed and then asked whether a few system users map to database users.
 */
#include "fuzz.h"
#include "hba.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstring(data, size);
	struct ident_map *m = ident_parse(text, size, "pg_ident.conf");
	static const char *const maps[] = { "mymap", "m", "omicron" };
	static const char *const users[][2] = {
		{ "alice@mydomain.com", "alice" }, { "root", "postgres" }, { "", "" }, { "tttt", "u" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++)
		for (size_t j = 0; j < ARRAY_SIZE(users); j++)
			(void)ident_check(m, maps[i], users[j][0], users[j][1]);
	ident_free(m);
	free(text);
	return 0;
}
