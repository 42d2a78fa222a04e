/*
 * fuzz_scram_client.c - libFuzzer target: SCRAM from the server's side of the
 * wire, i.e. what a hostile or broken PostgreSQL server can send pgvalve:
 * server-first-message, then server-final-message (the input split at its
 * first '\n'). The client nonce is fixed so inputs can extend it, and the
 * client uses pass-through keys, so no input can make it run PBKDF2 for a
 * million iterations (that bound, SCRAM_ITERATIONS_MAX, has its own unit test).
 */
#include "fuzz.h"
#include "scram.h"

#define FUZZ_CLIENT_NONCE "rOprNGfwEbeRWgbNEkqO"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t client_key[32] = { 1, 2, 3 }, server_key[32] = { 4, 5, 6 };
	struct scram_client sc;
	char out[SCRAM_MSG_MAX * 2];
	const char *err = NULL;
	const uint8_t *second;
	size_t first_len, second_len;

	fuzz_split(data, size, &first_len, &second, &second_len);
	char *server_first = fuzz_cstring(data, first_len);
	char *server_final = fuzz_cstring(second, second_len);

	scram_client_init(&sc, "user", FUZZ_CLIENT_NONCE);
	scram_client_set_keys(&sc, client_key, server_key);
	FUZZ_CHECK(scram_client_first(&sc, out, sizeof(out)) > 0);
	int n = scram_client_final(&sc, NULL, server_first, first_len, out, sizeof(out), &err);
	if (n < 0) {
		FUZZ_CHECK(err != NULL);
	} else {
		FUZZ_CHECK((size_t)n < sizeof(out) && strlen(out) == (size_t)n);
		bool ok = scram_client_verify(&sc, server_final, second_len, &err);
		FUZZ_CHECK(ok || err != NULL);
		if (err)
			FUZZ_CHECK(strlen(err) < 1024);
	}
	free(server_first);
	free(server_final);
	return 0;
}
