/*
 * test_auth_file.c - the userlist loader: line format, secret
 * classification, skipping malformed lines, duplicates, large files, and
 * that warnings never carry secret text.
 */
#include "common.h"
#include "log.h"
#include "auth_file.h"
#include "../check_main.h"

#include <check.h>
#include <unistd.h>

#define SCRAM_OK "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="

static struct auth_store *parse_str(const char *text)
{
	return auth_file_parse(text, strlen(text), "test");
}

/* Writes text to a new temporary file; the caller unlinks and frees the path. */
static char *write_temp(const char *text, size_t len)
{
	char *path = xstrdup("/tmp/pgvalve-test-auth-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		ck_assert_int_gt(n, 0);
		off += (size_t)n;
	}
	close(fd);
	return path;
}

static const struct auth_secret *must_find(const struct auth_store *store, const char *user)
{
	const struct auth_secret *s = auth_store_find(store, user);
	ck_assert_msg(s != NULL, "user %s not found", user);
	ck_assert_str_eq(s->user, user);
	return s;
}

START_TEST(test_secret_types)
{
	struct auth_store *store = parse_str(
		"\"plain\" \"secret\"\n"
		"\"md5user\" \"md5e473002ecaa9bfd0c982506b1bc2fe0b\"\n"
		"\"scram\" \"" SCRAM_OK "\"\n"
		"\"empty\" \"\"\n"
		"\"md5upper\" \"md5E473002ECAA9BFD0C982506B1BC2FE0B\"\n"
		"\"md5short\" \"md5e473002ecaa9bfd0c982506b1bc2fe0\"\n"
		"\"md5long\" \"md5e473002ecaa9bfd0c982506b1bc2fe0bb\"\n"
		"\"md5nothex\" \"md5e473002ecaa9bfd0c982506b1bc2fe0g\"\n");
	ck_assert_int_eq(auth_store_count(store), 8);

	const struct auth_secret *s = must_find(store, "plain");
	ck_assert_int_eq(s->type, SECRET_PLAIN);
	ck_assert_str_eq(s->secret, "secret");
	s = must_find(store, "md5user");
	ck_assert_int_eq(s->type, SECRET_MD5);
	ck_assert_str_eq(s->secret, "md5e473002ecaa9bfd0c982506b1bc2fe0b");
	s = must_find(store, "scram");
	ck_assert_int_eq(s->type, SECRET_SCRAM);
	ck_assert_str_eq(s->secret, SCRAM_OK);
	ck_assert_int_eq(s->scram.iterations, 4096);
	ck_assert_int_eq(s->scram.salt_len, 16);
	ck_assert_int_eq(s->scram.salt[0], 0x5b);	/* "W22Z" -> 5b 6d 99 */
	ck_assert_int_eq(s->scram.stored_key[0], 0x58);	/* "WG5d" -> 58 6e 5d */
	ck_assert_int_eq(s->scram.server_key[0], 0xc1);	/* "wfPL" -> c1 f3 cb */
	s = must_find(store, "empty");
	ck_assert_int_eq(s->type, SECRET_NONE);
	ck_assert_str_eq(s->secret, "");
	/* Not "md5" + exactly 32 lowercase hex digits: a plain password, as PostgreSQL decides. */
	ck_assert_int_eq(must_find(store, "md5upper")->type, SECRET_PLAIN);
	ck_assert_int_eq(must_find(store, "md5short")->type, SECRET_PLAIN);
	ck_assert_int_eq(must_find(store, "md5long")->type, SECRET_PLAIN);
	ck_assert_int_eq(must_find(store, "md5nothex")->type, SECRET_PLAIN);

	ck_assert_ptr_null(auth_store_find(store, "nobody"));
	ck_assert_ptr_null(auth_store_find(store, "Plain"));
	ck_assert_ptr_null(auth_store_find(store, "plai"));
	ck_assert_ptr_null(auth_store_find(store, ""));
	auth_store_free(store);
}
END_TEST

START_TEST(test_secret_parse_scram_malformed)
{
	struct auth_secret out;
	static const char *bad[] = {
		"SCRAM-SHA-256$",
		"SCRAM-SHA-256$4096",
		"SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==",
		"SCRAM-SHA-256$0:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$-1:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$99999999999:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$4096:$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ=$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4q=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
		"SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2d",
		"SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=",
		SCRAM_OK ":extra",
		SCRAM_OK "$extra",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(!auth_secret_parse("u", bad[i], &out), "accepted %s", bad[i]);
	ck_assert(auth_secret_parse("u", SCRAM_OK, &out));
	ck_assert_int_eq(out.type, SECRET_SCRAM);
	auth_secret_clear(&out);
	/* Something else starting with "SCRAM" is just a password. */
	ck_assert(auth_secret_parse("u", "SCRAM-SHA-1$x", &out));
	ck_assert_int_eq(out.type, SECRET_PLAIN);
	auth_secret_clear(&out);
}
END_TEST

START_TEST(test_quote_escaping)
{
	struct auth_store *store = parse_str(
		"\"we\"\"ird\" \"pa\"\"ss\"\"\"\n"
		"\"\"\"\" \"\"\"\"\"\"\n"
		"\"sp ace\"\t\"two  words\"\n");
	ck_assert_int_eq(auth_store_count(store), 3);
	ck_assert_str_eq(must_find(store, "we\"ird")->secret, "pa\"ss\"");
	ck_assert_str_eq(must_find(store, "\"")->secret, "\"\"");
	ck_assert_str_eq(must_find(store, "sp ace")->secret, "two  words");
	auth_store_free(store);
}
END_TEST

START_TEST(test_comments_blank_trailing)
{
	struct auth_store *store = parse_str(
		"; a comment \"x\" \"y\"\n"
		"# another \"x\" \"y\"\n"
		"\n"
		"   \n"
		"\t\r\n"
		"   ; indented comment\n"
		"  \"a\"   \"1\"   anything after is ignored \"z\" \"w\"\r\n"
		"\"b\"\t \t\"2\"\n"
		"\"c\" \"3\";trailing\n"
		"\"d\" \"4\"");	/* no final newline */
	ck_assert_int_eq(auth_store_count(store), 4);
	ck_assert_str_eq(must_find(store, "a")->secret, "1");
	ck_assert_str_eq(must_find(store, "b")->secret, "2");
	ck_assert_str_eq(must_find(store, "c")->secret, "3");
	ck_assert_str_eq(must_find(store, "d")->secret, "4");
	ck_assert_ptr_null(auth_store_find(store, "x"));
	ck_assert_ptr_null(auth_store_find(store, "z"));
	auth_store_free(store);

	store = parse_str("");
	ck_assert_int_eq(auth_store_count(store), 0);
	ck_assert_ptr_null(auth_store_find(store, "a"));
	auth_store_free(store);
}
END_TEST

START_TEST(test_malformed_skipped)
{
	static char user63[128], user64[129], secret511[AUTH_SECRET_MAX], secret512[AUTH_SECRET_MAX + 1];
	static char text[2 * AUTH_SECRET_MAX + 4096];
	/* PgBouncer 1.26's limits: user names up to 127 bytes, secrets up to 65,530 */
	memset(user63, 'u', 127);
	user63[127] = '\0';
	memset(user64, 'v', 128);
	user64[128] = '\0';
	memset(secret511, 's', AUTH_SECRET_MAX - 1);
	secret511[AUTH_SECRET_MAX - 1] = '\0';
	memset(secret512, 't', AUTH_SECRET_MAX);
	secret512[AUTH_SECRET_MAX] = '\0';
	snprintf(text, sizeof(text),
		 "\"good1\" \"p1\"\n"
		 "\"unterminated \"p\"\n"		/* user runs to the end of the line */
		 "\"nosecret\"\n"
		 "\"nosecret2\"   \n"
		 "\"unquoted\" secret\n"
		 "user \"secret\"\n"
		 "\"open\" \"secret\n"
		 "\"\" \"emptyuser\"\n"
		 "\"%s\" \"ok63\"\n"
		 "\"%s\" \"toolong\"\n"
		 "\"s511\" \"%s\"\n"
		 "\"s512\" \"%s\"\n"
		 "\"badscram\" \"SCRAM-SHA-256$4096:!!!$x:y\"\n"
		 "\"good2\" \"p2\"\n",
		 user63, user64, secret511, secret512);
	struct auth_store *store = parse_str(text);
	ck_assert_int_eq(auth_store_count(store), 4);
	ck_assert_str_eq(must_find(store, "good1")->secret, "p1");
	ck_assert_str_eq(must_find(store, "good2")->secret, "p2");
	ck_assert_str_eq(must_find(store, user63)->secret, "ok63");
	ck_assert_str_eq(must_find(store, "s511")->secret, secret511);
	ck_assert_ptr_null(auth_store_find(store, user64));
	ck_assert_ptr_null(auth_store_find(store, "s512"));
	ck_assert_ptr_null(auth_store_find(store, "badscram"));
	ck_assert_ptr_null(auth_store_find(store, "nosecret"));
	ck_assert_ptr_null(auth_store_find(store, "open"));
	auth_store_free(store);
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "\"a\" \"x\0y\"\n\"b\" \"2\"\n\"c\0\" \"3\"\n\"d\" \"4\"\0junk\n";
	struct auth_store *store = auth_file_parse(text, sizeof(text) - 1, "test");
	ck_assert_int_eq(auth_store_count(store), 2);
	ck_assert_ptr_null(auth_store_find(store, "a"));
	ck_assert_ptr_null(auth_store_find(store, "c"));
	ck_assert_str_eq(must_find(store, "b")->secret, "2");
	ck_assert_str_eq(must_find(store, "d")->secret, "4");
	auth_store_free(store);
}
END_TEST

START_TEST(test_duplicates_last_wins)
{
	struct auth_store *store = parse_str(
		"\"a\" \"first\"\n"
		"\"b\" \"only\"\n"
		"\"a\" \"md5e473002ecaa9bfd0c982506b1bc2fe0b\"\n"
		"\"a\" \"SCRAM-SHA-256$bad\"\n");	/* malformed: does not replace */
	ck_assert_int_eq(auth_store_count(store), 2);
	const struct auth_secret *a = must_find(store, "a");
	ck_assert_int_eq(a->type, SECRET_MD5);
	ck_assert_str_eq(a->secret, "md5e473002ecaa9bfd0c982506b1bc2fe0b");
	ck_assert_str_eq(must_find(store, "b")->secret, "only");
	auth_store_free(store);
}
END_TEST

START_TEST(test_missing_file)
{
	ck_assert_ptr_null(auth_file_load("/nonexistent/pgvalve/userlist.txt"));
	ck_assert_ptr_null(auth_file_load("/tmp"));	/* a directory */
}
END_TEST

START_TEST(test_load_file)
{
	const char *text = "\"alice\" \"secret\"\n; comment\n\"bob\" \"md5e473002ecaa9bfd0c982506b1bc2fe0b\"\n";
	char *path = write_temp(text, strlen(text));
	struct auth_store *store = auth_file_load(path);
	ck_assert_ptr_nonnull(store);
	ck_assert_int_eq(auth_store_count(store), 2);
	ck_assert_int_eq(must_find(store, "bob")->type, SECRET_MD5);
	auth_store_free(store);
	unlink(path);
	free(path);

	/* An empty file is a valid, empty store. */
	path = write_temp("", 0);
	store = auth_file_load(path);
	ck_assert_ptr_nonnull(store);
	ck_assert_int_eq(auth_store_count(store), 0);
	auth_store_free(store);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_many_users)
{
	const int n = 10000;
	size_t cap = (size_t)n * 64, len = 0;
	char *text = xmalloc(cap);
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "\"user%d\" \"pass%d\"\n", i, i);
	char *path = write_temp(text, len);
	free(text);

	struct auth_store *store = auth_file_load(path);
	ck_assert_ptr_nonnull(store);
	ck_assert_int_eq(auth_store_count(store), n);
	for (int i = 0; i < n; i++) {
		char user[32], pass[32];
		snprintf(user, sizeof(user), "user%d", i);
		snprintf(pass, sizeof(pass), "pass%d", i);
		ck_assert_str_eq(must_find(store, user)->secret, pass);
	}
	ck_assert_ptr_null(auth_store_find(store, "user10000"));
	ck_assert_ptr_null(auth_store_find(store, "user-1"));
	auth_store_free(store);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_long_lines)
{
	size_t junk = 200000;
	size_t cap = junk + 1024, len = 0;
	char *text = xmalloc(cap);
	/* A valid line with a huge trailing remark. */
	len += (size_t)snprintf(text + len, cap - len, "\"long\" \"pw\" ");
	memset(text + len, 'x', junk / 2);
	len += junk / 2;
	text[len++] = '\n';
	/* A secret far too long: skipped, and parsing resumes on the next line. */
	len += (size_t)snprintf(text + len, cap - len, "\"huge\" \"");
	memset(text + len, 'y', junk / 2);
	len += junk / 2;
	len += (size_t)snprintf(text + len, cap - len, "\"\n\"after\" \"ok\"\n");

	struct auth_store *store = auth_file_parse(text, len, "test");
	ck_assert_int_eq(auth_store_count(store), 2);
	ck_assert_str_eq(must_find(store, "long")->secret, "pw");
	ck_assert_str_eq(must_find(store, "after")->secret, "ok");
	ck_assert_ptr_null(auth_store_find(store, "huge"));
	auth_store_free(store);
	free(text);
}
END_TEST

/* Warnings name the line, never the secret. */
START_TEST(test_no_secret_in_log)
{
	char *logpath = write_temp("", 0);
	struct log_settings ls = { .logfile = logpath, .to_stderr = false };
	ck_assert_int_eq(log_setup(&ls), 0);

	struct auth_store *store = parse_str(
		"\"ok\" \"fine\"\n"
		"\"u1\" \"SCRAM-SHA-256$4096:TOPSECRET1\"\n"
		"\"u2\" \"TOPSECRET2\n"
		"TOPSECRET3 \"TOPSECRET4\"\n"
		"\"TOPSECRET5\"\n");
	ck_assert_int_eq(auth_store_count(store), 1);
	auth_store_free(store);
	log_close();

	FILE *f = fopen(logpath, "r");
	ck_assert_ptr_nonnull(f);
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(logpath);
	free(logpath);

	ck_assert_ptr_null(strstr(buf, "TOPSECRET"));
	ck_assert_ptr_nonnull(strstr(buf, "test:2: "));
	ck_assert_ptr_nonnull(strstr(buf, "test:3: "));
	ck_assert_ptr_nonnull(strstr(buf, "test:4: "));
	ck_assert_ptr_nonnull(strstr(buf, "test:5: "));
	ck_assert_ptr_null(strstr(buf, "test:1: "));
	ck_assert_ptr_nonnull(strstr(buf, "WARNING"));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("auth_file");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, test_secret_types);
	tcase_add_test(tc, test_secret_parse_scram_malformed);
	tcase_add_test(tc, test_quote_escaping);
	tcase_add_test(tc, test_comments_blank_trailing);
	tcase_add_test(tc, test_malformed_skipped);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_duplicates_last_wins);
	tcase_add_test(tc, test_no_secret_in_log);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_load_file);
	tcase_add_test(tc, test_many_users);
	tcase_add_test(tc, test_long_lines);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}
