/*
 * fuzz_hba.c - libFuzzer target: an auth_hba_file, parsed and then asked
 * about a few connections (Unix socket, IPv4, IPv6, TLS or not).
 *
 * @file includes resolve against the hba file's directory; the origin given
 * here is in a directory that does not exist, so relative ones fail to
 * open, and inputs naming an absolute @/path are skipped: a target must not
 * read whatever file the fuzzer spells (or block on /dev/stdin).
 */
#include "fuzz.h"
#include "config.h"
#include "hba.h"

#include <arpa/inet.h>
#include <netinet/in.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

static void ask(const struct hba *hba, const struct sockaddr *addr, bool tls, const char *db, const char *user)
{
	struct hba_request req = { .is_unix = addr == NULL, .is_tls = tls, .addr = addr, .dbname = db, .user = user };
	struct hba_match m;
	hba_match(hba, &req, &m);
	FUZZ_CHECK(m.method >= AUTH_TYPE_ANY && m.method <= AUTH_TYPE_GSS);	/* the last method */
	FUZZ_CHECK(m.line >= 0);
	if (m.map)
		(void)strlen(m.map);
	if (m.options)
		(void)strlen(m.options);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i + 1 < size; i++)
		if (data[i] == '@' && data[i + 1] == '/')
			return 0;
	char *text = fuzz_cstring(data, size);
	struct hba *hba = hba_parse(text, size, "/nonexistent/pgvalve-fuzz/pg_hba.conf");
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(5555) };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(5555) };

	inet_pton(AF_INET, "10.1.2.3", &sin.sin_addr);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6.sin6_addr);
	ask(hba, NULL, false, "db", "user");
	ask(hba, (const struct sockaddr *)&sin, true, "all", "user");
	ask(hba, (const struct sockaddr *)&sin6, false, "db", "db");
	(void)hba_rule_count(hba);
	hba_free(hba);
	free(text);
	return 0;
}
