/*
 * fuzz_scram_server.c - libFuzzer target: SCRAM from the client's side of the
 * wire, i.e. what any client can send pgvalve before it has authenticated:
 * client-first-message, then client-final-message (the input split at its
 * first '\n'), against the RFC 7677 example secret with a fixed server nonce.
 */
#include "fuzz.h"
#include "auth_file.h"
#include "scram.h"

#define FUZZ_SECRET "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$" \
	"WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
#define FUZZ_SERVER_NONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"

static struct auth_secret secret;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	if (!auth_secret_parse("user", FUZZ_SECRET, &secret) || secret.type != SECRET_SCRAM)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scram_server ss;
	char out[SCRAM_MSG_MAX * 2];
	const char *err = NULL;
	const uint8_t *second;
	size_t first_len, second_len;

	fuzz_split(data, size, &first_len, &second, &second_len);
	char *client_first = fuzz_cstring(data, first_len);
	char *client_final = fuzz_cstring(second, second_len);

	scram_server_init(&ss, &secret.scram, FUZZ_SERVER_NONCE);
	int n = scram_server_first(&ss, client_first, first_len, out, sizeof(out), &err);
	if (n < 0) {
		FUZZ_CHECK(err != NULL);
	} else {
		FUZZ_CHECK((size_t)n < sizeof(out) && strlen(out) == (size_t)n);
		err = NULL;
		n = scram_server_final(&ss, client_final, second_len, out, sizeof(out), &err);
		if (n < 0)
			FUZZ_CHECK(err != NULL && (n == -1 || n == -2));
		else
			FUZZ_CHECK(ss.has_client_key && (size_t)n < sizeof(out) && strlen(out) == (size_t)n);
	}
	free(client_first);
	free(client_final);
	return 0;
}
