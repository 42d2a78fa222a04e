/*
 * admin_reply.c - what the admin console writes back to its client:
 * result sets (RowDescription and DataRows, with PgBouncer's column types),
 * command tags, notices and errors, each reply ending with ReadyForQuery.
 *
 * Owns nothing: builds messages and sends them on the console client's
 * socket. Knows no command and reads no pool, server or config object
 * (but log_pooler_errors).
 */
#include "common.h"
#include "admin_internal.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "proto.h"

#include <stdarg.h>

/* PostgreSQL type OIDs used in RowDescription. */
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define OID_NUMERIC 1700

/* ---------------------------------------------------------------- result sets */

void admin_result_init(struct admin_result *r, uint32_t initial)
{
	pktbuf_init(&r->b, initial);
}

void admin_result_begin(struct admin_result *r, const char *types, const char *const *names)
{
	r->types = types;
	r->ncols = (int)strlen(types);
	r->nrows = 0;
	pktbuf_begin(&r->b, 'T');
	pktbuf_put_uint16(&r->b, (uint16_t)r->ncols);
	for (int i = 0; i < r->ncols; i++) {
		uint32_t oid = OID_TEXT;
		int16_t len = -1;
		switch (types[i]) {
		case 'i': oid = OID_INT4; len = 4; break;
		case 'q': oid = OID_INT8; len = 8; break;
		case 'N': oid = OID_NUMERIC; break;
		default: break;		/* 's' and 'T' */
		}
		pktbuf_put_string(&r->b, names[i]);
		pktbuf_put_uint32(&r->b, 0);
		pktbuf_put_uint16(&r->b, 0);
		pktbuf_put_uint32(&r->b, oid);
		pktbuf_put_uint16(&r->b, (uint16_t)len);
		pktbuf_put_uint32(&r->b, 0xFFFFFFFFu);
		pktbuf_put_uint16(&r->b, 0);
	}
	pktbuf_end(&r->b);
}

/* One row: values as text, NULL for SQL NULL. */
void admin_result_row(struct admin_result *r, const char *const *values)
{
	pktbuf_begin(&r->b, 'D');
	pktbuf_put_uint16(&r->b, (uint16_t)r->ncols);
	for (int i = 0; i < r->ncols; i++) {
		if (!values[i]) {
			pktbuf_put_uint32(&r->b, 0xFFFFFFFFu);
			continue;
		}
		uint32_t len = (uint32_t)strlen(values[i]);
		pktbuf_put_uint32(&r->b, len);
		pktbuf_put_bytes(&r->b, values[i], len);
	}
	pktbuf_end(&r->b);
	r->nrows++;
}

static void put_complete(struct pktbuf *b, const char *tag)
{
	pktbuf_begin(b, 'C');
	pktbuf_put_string(b, tag);
	pktbuf_end(b);
}

void admin_result_send(struct client *client, struct admin_result *r)
{
	put_complete(&r->b, "SHOW");
	proto_put_ready(&r->b, 'I');
	netbuf_send(&client->nb, r->b.buf, r->b.len);
	pktbuf_free(&r->b);
}

/* ---------------------------------------------------------------- replies */

void admin_reply_error(struct client *client, const char *sqlstate, const char *msg)
{
	struct pktbuf b;
	pktbuf_init(&b, 256);
	proto_put_error(&b, "ERROR", sqlstate, msg);
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
	log_error("%s", msg);
	if (pgv.cfg->log_pooler_errors)
		client_log(LOG_LEVEL_WARNING, client, "pooler error: %s", msg);
}

void admin_reply_errorf(struct client *client, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	admin_reply_error(client, "08P01", msg);
}

void admin_reply_complete(struct client *client, const char *tag)
{
	struct pktbuf b;
	pktbuf_init(&b, 64);
	put_complete(&b, tag);
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
}

static void put_notice(struct pktbuf *b, const char *msg, const char *detail)
{
	pktbuf_begin(b, 'N');
	pktbuf_put_byte(b, 'S');
	pktbuf_put_string(b, "NOTICE");
	pktbuf_put_byte(b, 'C');
	pktbuf_put_string(b, "00000");
	pktbuf_put_byte(b, 'M');
	pktbuf_put_string(b, msg);
	if (detail) {
		pktbuf_put_byte(b, 'D');
		pktbuf_put_string(b, detail);
	}
	pktbuf_put_byte(b, 0);
	pktbuf_end(b);
}

void admin_send_notice(struct client *client, const char *msg, const char *detail)
{
	struct pktbuf b;
	pktbuf_init(&b, 512);
	put_notice(&b, msg, detail);
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
}

void admin_reply_notice(struct client *client, const char *msg, const char *detail, const char *tag)
{
	struct pktbuf b;
	pktbuf_init(&b, 1024);
	put_notice(&b, msg, detail);
	put_complete(&b, tag);
	proto_put_ready(&b, 'I');
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
}
