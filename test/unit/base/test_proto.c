/*
 * test_proto.c - the wire-protocol layer: header validation, bounded
 * readers, startup parsing and message builders.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "proto.h"
#include "varcache.h"
#include "session_set.h"
#include "../check_main.h"

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

START_TEST(header_typed_ok_and_partial)
{
	uint8_t buf[16] = { 'Q' };
	struct pkt pkt;
	put_be32(buf + 1, 9);	/* 4 length + 5 payload */
	ck_assert_int_eq(proto_parse_header(buf, 3, false, 1024, &pkt), PROTO_HDR_NEED_MORE);
	ck_assert_int_eq(proto_parse_header(buf, 7, false, 1024, &pkt), PROTO_HDR_OK);
	ck_assert_int_eq(pkt.type, 'Q');
	ck_assert_uint_eq(pkt.len, 10);
	ck_assert_uint_eq(pkt.avail, 7);
	ck_assert(!pkt_complete(&pkt));
	ck_assert_int_eq(proto_parse_header(buf, 16, false, 1024, &pkt), PROTO_HDR_OK);
	ck_assert_uint_eq(pkt.avail, 10);
	ck_assert(pkt_complete(&pkt));
}
END_TEST

START_TEST(header_rejects_bad_lengths)
{
	uint8_t buf[8] = { 'Q' };
	struct pkt pkt;
	put_be32(buf + 1, 3);		/* shorter than the length field itself */
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 1024, &pkt), PROTO_HDR_INVALID);
	put_be32(buf + 1, 0xFFFFFFFFu);	/* "negative" */
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 1024, &pkt), PROTO_HDR_INVALID);
	put_be32(buf + 1, 0x80000000u);
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 0x7fffffffu, &pkt), PROTO_HDR_INVALID);
	put_be32(buf + 1, 2000);	/* over the caller's limit */
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 1024, &pkt), PROTO_HDR_INVALID);
	put_be32(buf + 1, 1023);	/* exactly at the limit with the type byte */
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 1024, &pkt), PROTO_HDR_OK);
	buf[0] = 0;			/* type byte 0 is never valid after startup */
	ck_assert_int_eq(proto_parse_header(buf, 8, false, 1024, &pkt), PROTO_HDR_INVALID);
}
END_TEST

START_TEST(header_startup)
{
	uint8_t buf[8];
	struct pkt pkt;
	put_be32(buf, 8);
	put_be32(buf + 4, PROTO_SSL_REQUEST);
	ck_assert_int_eq(proto_parse_header(buf, 7, true, PROTO_STARTUP_MAX, &pkt), PROTO_HDR_NEED_MORE);
	ck_assert_int_eq(proto_parse_header(buf, 8, true, PROTO_STARTUP_MAX, &pkt), PROTO_HDR_OK);
	ck_assert_uint_eq(pkt.len, 8);
	ck_assert_int_eq(pkt.type, 0);
	put_be32(buf, 7);
	ck_assert_int_eq(proto_parse_header(buf, 8, true, PROTO_STARTUP_MAX, &pkt), PROTO_HDR_INVALID);
	put_be32(buf, 0x7fffffff);
	ck_assert_int_eq(proto_parse_header(buf, 8, true, PROTO_STARTUP_MAX, &pkt), PROTO_HDR_INVALID);
	put_be32(buf, PROTO_STARTUP_MAX + 1);
	ck_assert_int_eq(proto_parse_header(buf, 8, true, PROTO_STARTUP_MAX, &pkt), PROTO_HDR_INVALID);
}
END_TEST

START_TEST(reader_never_overruns)
{
	const uint8_t data[] = { 0, 0, 0, 7, 'a', 'b' };	/* int, then an unterminated string */
	struct pkt_reader r;
	pkt_reader_init(&r, data, sizeof(data));
	ck_assert_uint_eq(pkt_get_uint32(&r), 7);
	ck_assert_ptr_null(pkt_get_string(&r));
	ck_assert(r.failed);
	ck_assert_uint_eq(pkt_get_uint32(&r), 0);	/* stays failed */

	pkt_reader_init(&r, data, 3);
	ck_assert_uint_eq(pkt_get_uint32(&r), 0);
	ck_assert(r.failed);
	pkt_reader_init(&r, data, sizeof(data));
	ck_assert_ptr_null(pkt_get_bytes(&r, 7));
	ck_assert(r.failed);
}
END_TEST

static uint32_t build_startup(uint8_t *buf, const char *const *kv, int n, bool terminate)
{
	uint32_t pos = 0;
	put_be32(buf, PROTO_VERSION_3);
	pos = 4;
	for (int i = 0; i < n; i++) {
		size_t l = strlen(kv[i]) + 1;
		memcpy(buf + pos, kv[i], l);
		pos += (uint32_t)l;
	}
	if (terminate)
		buf[pos++] = 0;
	return pos;
}

START_TEST(startup_parse)
{
	uint8_t buf[512];
	const char *kv[] = { "user", "alice", "database", "app", "application_name", "psql" };
	struct startup_params sp;
	const char *err = NULL;
	uint32_t len = build_startup(buf, kv, 6, true);
	ck_assert(proto_parse_startup(buf, len, &sp, &err));
	ck_assert_uint_eq(sp.version, PROTO_VERSION_3);
	ck_assert_int_eq(sp.count, 3);
	ck_assert_str_eq(startup_param(&sp, "user"), "alice");
	ck_assert_str_eq(startup_param(&sp, "application_name"), "psql");
	ck_assert_ptr_null(startup_param(&sp, "options"));

	/* missing final terminator */
	len = build_startup(buf, kv, 6, false);
	ck_assert(!proto_parse_startup(buf, len, &sp, &err));
	/* a name without a value */
	len = build_startup(buf, kv, 5, true);
	ck_assert(!proto_parse_startup(buf, len, &sp, &err));
	ck_assert_ptr_nonnull(err);
	/* junk after the terminator */
	len = build_startup(buf, kv, 6, true);
	buf[len++] = 'x';
	ck_assert(!proto_parse_startup(buf, len, &sp, &err));
	/* too short for the version */
	ck_assert(!proto_parse_startup(buf, 3, &sp, &err));
}
END_TEST

START_TEST(startup_too_many_params)
{
	uint8_t buf[4096];
	const char *kv[2 * (STARTUP_MAX_PARAMS + 1)];
	char names[STARTUP_MAX_PARAMS + 1][8];
	for (int i = 0; i <= STARTUP_MAX_PARAMS; i++) {
		snprintf(names[i], sizeof(names[i]), "p%d", i);
		kv[2 * i] = names[i];
		kv[2 * i + 1] = "v";
	}
	struct startup_params sp;
	const char *err = NULL;
	uint32_t len = build_startup(buf, kv, 2 * (STARTUP_MAX_PARAMS + 1), true);
	ck_assert(!proto_parse_startup(buf, len, &sp, &err));
	ck_assert_str_eq(err, "too many startup parameters");
}
END_TEST

START_TEST(builders_roundtrip)
{
	struct pktbuf b;
	struct pkt pkt;
	pktbuf_init(&b, 8);	/* forces growth */
	proto_put_error(&b, "FATAL", "28P01", "password authentication failed for user \"x\"");
	proto_put_ready(&b, 'T');
	ck_assert(!b.failed);

	ck_assert_int_eq(proto_parse_header(b.buf, b.len, false, 1 << 20, &pkt), PROTO_HDR_OK);
	ck_assert_int_eq(pkt.type, 'E');
	ck_assert(pkt_complete(&pkt));
	ck_assert_str_eq(proto_error_field(pkt_body(&pkt), pkt_body_len(&pkt), 'C'), "28P01");
	ck_assert_str_eq(proto_error_field(pkt_body(&pkt), pkt_body_len(&pkt), 'S'), "FATAL");
	ck_assert_ptr_null(proto_error_field(pkt_body(&pkt), pkt_body_len(&pkt), 'D'));

	uint32_t off = pkt.len;
	ck_assert_int_eq(proto_parse_header(b.buf + off, b.len - off, false, 1 << 20, &pkt), PROTO_HDR_OK);
	ck_assert_int_eq(pkt.type, 'Z');
	ck_assert_uint_eq(pkt.len, 6);
	ck_assert_int_eq(pkt_body(&pkt)[0], 'T');
	ck_assert_uint_eq(off + pkt.len, b.len);
	pktbuf_free(&b);
}
END_TEST

START_TEST(fixed_builder_overflow_flags_failure)
{
	uint8_t mem[8];
	struct pktbuf b;
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_query(&b, "SELECT 1");
	ck_assert(b.failed);
}
END_TEST

START_TEST(error_field_malformed)
{
	const uint8_t unterminated[] = { 'C', '2', '8' };
	ck_assert_ptr_null(proto_error_field(unterminated, sizeof(unterminated), 'C'));
	ck_assert_ptr_null(proto_error_field(unterminated, 0, 'C'));
}
END_TEST

START_TEST(quote_literal)
{
	char out[64];
	ck_assert(proto_quote_literal("it's a \\ test", out, sizeof(out)));
	ck_assert_str_eq(out, "E'it''s a \\\\ test'");
	ck_assert(!proto_quote_literal("0123456789", out, 8));
}
END_TEST

START_TEST(varcache_diff)
{
	varcache_configure("extra_float_digits");
	struct varcache *client = NULL, *server = NULL;
	struct pktbuf sql;
	pktbuf_init(&sql, 64);
	varcache_set_by_name(&client, "TimeZone", "UTC");
	varcache_set_by_name(&client, "application_name", "a'b");
	varcache_set_by_name(&client, "EXTRA_FLOAT_DIGITS", "3");
	varcache_set_by_name(&server, "timezone", "UTC");
	ck_assert(!varcache_set_by_name(&client, "work_mem", "1MB"));
	ck_assert_int_eq(varcache_diff_sql(client, server, &sql), 2);
	pktbuf_put_byte(&sql, 0);
	ck_assert_str_eq((char *)sql.buf,
			 "SELECT pg_catalog.set_config(E'application_name', E'a''b', false), "
			 "pg_catalog.set_config(E'extra_float_digits', E'3', false)");
	/* client_encoding goes apart (it must run first, alone); read-only parameters never. */
	pktbuf_reset(&sql);
	varcache_set_by_name(&client, "client_encoding", "SJIS");
	varcache_set_by_name(&client, "server_version", "99");
	ck_assert_int_eq(varcache_diff_encoding_sql(client, server, &sql), 1);
	pktbuf_put_byte(&sql, 0);
	ck_assert_str_eq((char *)sql.buf, "SELECT pg_catalog.set_config(E'client_encoding', E'SJIS', false)");
	pktbuf_reset(&sql);
	ck_assert_int_eq(varcache_diff_sql(client, server, &sql), 2);
	/* A name a newer server reports is learned, settable; an unknown server value differs from any. */
	int learned = varcache_learn("some_new_guc");
	ck_assert_int_ge(learned, 0);
	ck_assert(varcache_settable(learned));
	ck_assert(!varcache_settable(varcache_index("server_version")));
	varcache_copy_set(&server, client);
	pktbuf_reset(&sql);
	ck_assert_int_eq(varcache_diff_encoding_sql(client, server, &sql), 0);
	ck_assert_int_eq(varcache_diff_sql(client, server, &sql), 0);
	varcache_mark_unknown(&server, varcache_index("search_path"));
	ck_assert_int_eq(varcache_diff_sql(client, server, &sql), 1);
	pktbuf_put_byte(&sql, 0);
	ck_assert_str_eq((char *)sql.buf, "RESET \"search_path\"");
	varcache_forget_except(&server, UINT64_C(1) << varcache_index("TimeZone"));
	ck_assert_ptr_null(varcache_get(server, varcache_index("application_name")));
	ck_assert_str_eq(varcache_get(server, varcache_index("TimeZone")), "UTC");
	pktbuf_free(&sql);
	varcache_unref(client);
	varcache_unref(server);
	varcache_configure(NULL);
}
END_TEST

/* Logins with the same values share one copy; a change gets its own, the others keep theirs. */
START_TEST(varcache_shared_login)
{
	varcache_configure(NULL);
	struct varcache *last = NULL, *a = NULL, *b = NULL, *c = NULL;
	varcache_set_by_name(&a, "TimeZone", "UTC");
	varcache_set_by_name(&b, "timezone", "UTC");
	varcache_set_by_name(&c, "TimeZone", "CET");
	varcache_share_login(&a, NULL, &last);
	ck_assert_ptr_eq(a, last);
	varcache_share_login(&b, NULL, &last);
	ck_assert_ptr_eq(b, a);
	ck_assert_uint_eq(a->refs, 3);
	/* the same value again changes nothing, and copies nothing */
	varcache_set_by_name(&b, "TimeZone", "UTC");
	ck_assert_ptr_eq(b, a);
	varcache_set_by_name(&b, "TimeZone", "GMT");
	ck_assert_ptr_ne(b, a);
	ck_assert_str_eq(varcache_get(a, varcache_index("TimeZone")), "UTC");
	ck_assert_str_eq(varcache_get(b, varcache_index("TimeZone")), "GMT");
	varcache_clear(&a, varcache_index("TimeZone"));
	ck_assert_ptr_null(varcache_get(a, varcache_index("TimeZone")));
	ck_assert_str_eq(varcache_get(last, varcache_index("TimeZone")), "UTC");
	/* different values: the newest login is what the next one is compared with */
	varcache_share_login(&c, NULL, &last);
	ck_assert_ptr_eq(c, last);
	ck_assert_uint_eq(c->refs, 2);
	/* values a login did not bring come from the welcome; with none of its own it shares them */
	struct varcache *welcome = NULL, *d = NULL, *e = NULL, *last2 = NULL;
	varcache_set_by_name(&welcome, "DateStyle", "ISO, MDY");
	varcache_set_by_name(&d, "TimeZone", "UTC");
	varcache_share_login(&d, welcome, &last2);
	ck_assert_str_eq(varcache_get(d, varcache_index("DateStyle")), "ISO, MDY");
	varcache_share_login(&e, welcome, &last2);
	ck_assert_ptr_ne(e, d);
	ck_assert_str_eq(varcache_get(e, varcache_index("DateStyle")), "ISO, MDY");
	ck_assert_ptr_null(varcache_get(e, varcache_index("TimeZone")));
	struct varcache *f = NULL;
	varcache_share_login(&f, welcome, &last2);
	ck_assert_ptr_eq(f, e);
	ck_assert_uint_eq(e->refs, 3);
	struct varcache *all[] = { a, b, c, last, welcome, d, e, f, last2 };
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		varcache_unref(all[i]);
}
END_TEST


static enum session_set_kind parse_set(const char *sql, char *name)
{
	name[0] = '\0';
	return session_set_parse(sql, strlen(sql) + 1, name, 128);
}

START_TEST(session_set_statements)
{
	char name[128];
	ck_assert_int_eq(parse_set("SET statement_timeout = '1s'", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "statement_timeout");
	ck_assert_int_eq(parse_set("  /* c */ set SESSION Work_Mem TO 5000;  ", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "work_mem");
	ck_assert_int_eq(parse_set("-- c\nSET myapp.tenant = 'x'", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "myapp.tenant");
	ck_assert_int_eq(parse_set("SET \"Weird\"\"Name\" = 1", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "Weird\"Name");
	ck_assert_int_eq(parse_set("SET TIME ZONE 'UTC'", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "timezone");
	ck_assert_int_eq(parse_set("SET SESSION AUTHORIZATION bob", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "session_authorization");
	ck_assert_int_eq(parse_set("SET NAMES 'SJIS'", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "client_encoding");
	ck_assert_int_eq(parse_set("SET ROLE app", name), SESSION_SET_SET);
	ck_assert_str_eq(name, "role");
	ck_assert_int_eq(parse_set("RESET search_path", name), SESSION_SET_RESET);
	ck_assert_str_eq(name, "search_path");
	ck_assert_int_eq(parse_set("reset all", name), SESSION_SET_RESET_ALL);
	ck_assert_int_eq(parse_set("DISCARD ALL;", name), SESSION_SET_DISCARD_ALL);
	ck_assert_int_eq(parse_set("DISCARD PLANS", name), SESSION_SET_NONE);
	ck_assert_int_eq(parse_set("SET LOCAL work_mem = 1", name), SESSION_SET_LOCAL);
	ck_assert_int_eq(parse_set("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", name), SESSION_SET_LOCAL);
	ck_assert_int_eq(parse_set("SET CONSTRAINTS ALL DEFERRED", name), SESSION_SET_LOCAL);
	ck_assert_int_eq(parse_set("SELECT 1", name), SESSION_SET_NONE);
	ck_assert_int_eq(parse_set("SETTINGS", name), SESSION_SET_NONE);
	/* never replayed: a second statement, or a backslash that could hide one */
	ck_assert_int_eq(parse_set("SET a.b = 1; SELECT 1", name), SESSION_SET_OPAQUE);
	ck_assert_int_eq(parse_set("SET a.b = 'x;y'", name), SESSION_SET_SET);
	ck_assert_int_eq(parse_set("SET a.b = E'\\'; DROP TABLE t; --'", name), SESSION_SET_OPAQUE);
	ck_assert_int_eq(parse_set("SET a.b = $$x$$", name), SESSION_SET_OPAQUE);
	ck_assert_int_eq(parse_set("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", name), SESSION_SET_OPAQUE);
}
END_TEST

START_TEST(list_items)
{
	const char *p = " a,,b  c,\tlong_item_name ";
	char buf[5];
	ck_assert(list_next_item(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "a");
	ck_assert(list_next_item(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "b");
	ck_assert(list_next_item(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "c");
	ck_assert(list_next_item(&p, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "long");	/* cut to the buffer */
	ck_assert(!list_next_item(&p, buf, sizeof(buf)));
	ck_assert_uint_eq(hash_string("abc"), hash_string("abc"));
	ck_assert_uint_ne(hash_string("abc"), hash_string("abd"));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, header_typed_ok_and_partial);
	tcase_add_test(tc, header_rejects_bad_lengths);
	tcase_add_test(tc, header_startup);
	tcase_add_test(tc, reader_never_overruns);
	tcase_add_test(tc, startup_parse);
	tcase_add_test(tc, startup_too_many_params);
	tcase_add_test(tc, builders_roundtrip);
	tcase_add_test(tc, fixed_builder_overflow_flags_failure);
	tcase_add_test(tc, error_field_malformed);
	tcase_add_test(tc, quote_literal);
	tcase_add_test(tc, varcache_diff);
	tcase_add_test(tc, varcache_shared_login);
	tcase_add_test(tc, session_set_statements);
	tcase_add_test(tc, list_items);
	suite_add_tcase(s, tc);
	return s;
}
