/*
 * fuzz_auth_file.c - libFuzzer target: an auth_file (userlist.txt), parsed
 * and every entry read back; each must be consistent with its own secret.
 */
#include "fuzz.h"
#include "auth_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstring(data, size);
	struct auth_store *store = auth_file_parse(text, size, "userlist.txt");
	size_t n = auth_store_count(store);

	FUZZ_CHECK(store != NULL);
	for (size_t i = 0; i < n; i++) {
		const struct auth_secret *s = auth_store_entry(store, i);
		FUZZ_CHECK(s != NULL);
		FUZZ_CHECK(strlen(s->user) < AUTH_NAME_MAX && strlen(s->secret) < AUTH_SECRET_MAX);
		FUZZ_CHECK(auth_store_find(store, s->user) != NULL);
		if (s->type == SECRET_SCRAM)
			FUZZ_CHECK(s->scram.iterations > 0 && s->scram.salt_len > 0 &&
				   (size_t)s->scram.salt_len <= sizeof(s->scram.salt));
	}
	FUZZ_CHECK(auth_store_entry(store, n) == NULL);
	auth_store_free(store);
	free(text);
	return 0;
}
