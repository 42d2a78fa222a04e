/*
 * proto.c - PostgreSQL v3 message framing, bounded readers and builders.
 *
 * Pure functions over caller-owned memory: no sockets, no connection
 * state, no logging. This is the only place that turns network bytes into
 * lengths, so every bound check on them lives here.
 */
#include "common.h"
#include "proto.h"
#include "log.h"

enum proto_header_result proto_parse_header(const uint8_t *buf, uint32_t avail, bool startup,
					    uint32_t max_len, struct pkt *pkt)
{
	uint32_t len;

	if (startup) {
		/* length and protocol code: 8 bytes */
		if (avail < PROTO_STARTUP_HEADER_LEN)
			return PROTO_HDR_NEED_MORE;
		len = proto_read_be32(buf);
		if (len < PROTO_STARTUP_HEADER_LEN || len > max_len)
			return PROTO_HDR_INVALID;
		pkt->type = 0;
		pkt->len = len;
	} else {
		if (avail < PROTO_HEADER_LEN)
			return PROTO_HDR_NEED_MORE;
		len = proto_read_be32(buf + 1);
		/* The length covers itself but not the type byte. */
		/* 64-bit: neither max_len 0 nor len 0xFFFFFFFF may wrap around */
		if (len < 4 || (uint64_t)len + 1 > (uint64_t)max_len || buf[0] == 0)
			return PROTO_HDR_INVALID;
		pkt->type = buf[0];
		pkt->len = len + 1;
	}
	pkt->data = buf;
	pkt->avail = avail < pkt->len ? avail : pkt->len;
	return PROTO_HDR_OK;
}

void pkt_reader_init(struct pkt_reader *r, const uint8_t *data, uint32_t len)
{
	r->data = data;
	r->len = len;
	r->pos = 0;
	r->failed = false;
}

uint8_t pkt_get_byte(struct pkt_reader *r)
{
	if (r->failed || r->len - r->pos < 1) {
		r->failed = true;
		return 0;
	}
	return r->data[r->pos++];
}

uint16_t pkt_get_uint16(struct pkt_reader *r)
{
	if (r->failed || r->len - r->pos < 2) {
		r->failed = true;
		return 0;
	}
	uint16_t v = (uint16_t)((r->data[r->pos] << 8) | r->data[r->pos + 1]);
	r->pos += 2;
	return v;
}

uint32_t pkt_get_uint32(struct pkt_reader *r)
{
	if (r->failed || r->len - r->pos < 4) {
		r->failed = true;
		return 0;
	}
	uint32_t v = proto_read_be32(r->data + r->pos);
	r->pos += 4;
	return v;
}

const char *pkt_get_string(struct pkt_reader *r)
{
	if (r->failed)
		return NULL;
	const uint8_t *start = r->data + r->pos;
	const uint8_t *nul = memchr(start, 0, r->len - r->pos);
	if (!nul) {
		r->failed = true;
		return NULL;
	}
	r->pos += (uint32_t)(nul - start) + 1;
	return (const char *)start;
}

const uint8_t *pkt_get_bytes(struct pkt_reader *r, uint32_t n)
{
	if (r->failed || r->len - r->pos < n) {
		r->failed = true;
		return NULL;
	}
	const uint8_t *p = r->data + r->pos;
	r->pos += n;
	return p;
}

bool proto_parse_startup(const uint8_t *body, uint32_t len, struct startup_params *sp, const char **err)
{
	struct pkt_reader r;

	pkt_reader_init(&r, body, len);
	sp->count = 0;
	sp->version = pkt_get_uint32(&r);
	if (r.failed) {
		*err = "startup packet too short";
		return false;
	}
	for (;;) {
		const char *name = pkt_get_string(&r);
		if (!name) {
			*err = "unterminated startup packet";
			return false;
		}
		if (name[0] == '\0')
			break;	/* the list ends with an empty name */
		const char *value = pkt_get_string(&r);
		if (!value) {
			*err = "startup parameter without a value";
			return false;
		}
		if (sp->count >= STARTUP_MAX_PARAMS) {
			*err = "too many startup parameters";
			return false;
		}
		sp->names[sp->count] = name;
		sp->values[sp->count] = value;
		sp->count++;
	}
	if (pkt_remaining(&r) != 0) {
		*err = "junk after startup parameters";
		return false;
	}
	return true;
}

const char *startup_param(const struct startup_params *sp, const char *name)
{
	for (int i = 0; i < sp->count; i++)
		if (strcmp(sp->names[i], name) == 0)
			return sp->values[i];
	return NULL;
}

/* ---------------------------------------------------------------- builders */

void pktbuf_init(struct pktbuf *b, uint32_t initial)
{
	memset(b, 0, sizeof(*b));
	b->size = initial ? initial : 256;
	b->buf = xmalloc(b->size);
}

void pktbuf_init_fixed(struct pktbuf *b, uint8_t *mem, uint32_t size)
{
	memset(b, 0, sizeof(*b));
	b->buf = mem;
	b->size = size;
	b->fixed = true;
}

void pktbuf_free(struct pktbuf *b)
{
	if (!b->fixed)
		free(b->buf);
	b->buf = NULL;
	b->len = b->size = 0;
}

void pktbuf_reset(struct pktbuf *b)
{
	b->len = 0;
	b->failed = false;
}

static bool pktbuf_room(struct pktbuf *b, uint32_t need)
{
	if (b->failed)
		return false;
	if (b->size - b->len >= need)
		return true;
	if (b->fixed) {
		b->failed = true;
		return false;
	}
	uint32_t size = b->size;
	while (size - b->len < need)
		size *= 2;
	b->buf = xrealloc(b->buf, size);
	b->size = size;
	return true;
}

void pktbuf_put_bytes_slow(struct pktbuf *b, const void *data, uint32_t len)
{
	if (!pktbuf_room(b, len))
		return;
	memcpy(b->buf + b->len, data, len);
	b->len += len;
}

void pktbuf_begin(struct pktbuf *b, uint8_t type)
{
	b->msg_start = b->len;
	b->msg_typed = type != 0;
	if (type)
		pktbuf_put_byte(b, type);
	pktbuf_put_uint32(b, 0);	/* patched by pktbuf_end */
}

void pktbuf_end(struct pktbuf *b)
{
	pktbuf_end_before(b, 0);
}

void pktbuf_end_before(struct pktbuf *b, uint32_t more)
{
	if (b->failed)
		return;
	uint32_t len_pos = b->msg_start + (b->msg_typed ? 1 : 0);
	uint32_t len = b->len - len_pos + more;
	b->buf[len_pos] = (uint8_t)(len >> 24);
	b->buf[len_pos + 1] = (uint8_t)(len >> 16);
	b->buf[len_pos + 2] = (uint8_t)(len >> 8);
	b->buf[len_pos + 3] = (uint8_t)len;
}

static void put_error_like(struct pktbuf *b, uint8_t type, const char *severity,
			   const char *sqlstate, const char *message)
{
	pktbuf_begin(b, type);
	pktbuf_put_byte(b, 'S');
	pktbuf_put_string(b, severity);
	pktbuf_put_byte(b, 'V');
	pktbuf_put_string(b, severity);
	pktbuf_put_byte(b, 'C');
	pktbuf_put_string(b, sqlstate);
	pktbuf_put_byte(b, 'M');
	pktbuf_put_string(b, message);
	pktbuf_put_byte(b, 0);
	pktbuf_end(b);
}

void proto_put_error(struct pktbuf *b, const char *severity, const char *sqlstate, const char *message)
{
	put_error_like(b, 'E', severity, sqlstate, message);
}

void proto_put_notice(struct pktbuf *b, const char *sqlstate, const char *message)
{
	put_error_like(b, 'N', "NOTICE", sqlstate, message);
}

void proto_put_auth_request(struct pktbuf *b, uint32_t code, const void *extra, uint32_t extra_len)
{
	pktbuf_begin(b, 'R');
	pktbuf_put_uint32(b, code);
	if (extra_len)
		pktbuf_put_bytes(b, extra, extra_len);
	pktbuf_end(b);
}

void proto_put_parameter_status(struct pktbuf *b, const char *name, const char *value)
{
	pktbuf_begin(b, 'S');
	pktbuf_put_string(b, name);
	pktbuf_put_string(b, value);
	pktbuf_end(b);
}

void proto_put_backend_key(struct pktbuf *b, uint32_t pid, uint32_t key)
{
	pktbuf_begin(b, 'K');
	pktbuf_put_uint32(b, pid);
	pktbuf_put_uint32(b, key);
	pktbuf_end(b);
}

void proto_put_backend_key_bytes(struct pktbuf *b, uint32_t pid, const uint8_t *key, uint32_t key_len)
{
	pktbuf_begin(b, 'K');
	pktbuf_put_uint32(b, pid);
	pktbuf_put_bytes(b, key, key_len);
	pktbuf_end(b);
}

void proto_put_negotiate_version(struct pktbuf *b, uint32_t version, const char *const *options, int count)
{
	pktbuf_begin(b, 'v');
	pktbuf_put_uint32(b, version);
	pktbuf_put_uint32(b, (uint32_t)count);
	for (int i = 0; i < count; i++)
		pktbuf_put_string(b, options[i]);
	pktbuf_end(b);
}


void proto_put_ready(struct pktbuf *b, char status)
{
	pktbuf_begin(b, 'Z');
	pktbuf_put_byte(b, (uint8_t)status);
	pktbuf_end(b);
}

void proto_put_query(struct pktbuf *b, const char *sql)
{
	pktbuf_begin(b, 'Q');
	pktbuf_put_string(b, sql);
	pktbuf_end(b);
}

void proto_put_password(struct pktbuf *b, const char *password)
{
	pktbuf_begin(b, 'p');
	pktbuf_put_string(b, password);
	pktbuf_end(b);
}

void proto_put_terminate(struct pktbuf *b)
{
	pktbuf_begin(b, 'X');
	pktbuf_end(b);
}

const char *proto_error_field(const uint8_t *body, uint32_t len, char field)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	for (;;) {
		uint8_t code = pkt_get_byte(&r);
		if (r.failed || code == 0)
			return NULL;
		const char *value = pkt_get_string(&r);
		if (!value)
			return NULL;
		if (code == (uint8_t)field)
			return value;
	}
}

bool proto_quote_literal(const char *value, char *out, size_t size)
{
	/* E'' form: the meaning of a backslash does not depend on standard_conforming_strings. */
	size_t n = 0;
	if (size < 4)
		return false;
	out[n++] = 'E';
	out[n++] = '\'';
	for (const char *p = value; *p; p++) {
		if (n + 4 >= size)
			return false;
		if (*p == '\'' || *p == '\\')
			out[n++] = *p;
		out[n++] = *p;
	}
	out[n++] = '\'';
	out[n] = '\0';
	return true;
}

void proto_put_cancel_request_bytes(struct pktbuf *b, uint32_t pid, const uint8_t *key, uint32_t key_len)
{
	pktbuf_begin(b, 0);
	pktbuf_put_uint32(b, PROTO_CANCEL_REQUEST);
	pktbuf_put_uint32(b, pid);
	pktbuf_put_bytes(b, key, key_len);
	pktbuf_end(b);
}

void proto_put_cancel_request(struct pktbuf *b, uint32_t pid, uint32_t key)
{
	const uint8_t bytes[4] = { (uint8_t)(key >> 24), (uint8_t)(key >> 16), (uint8_t)(key >> 8), (uint8_t)key };
	proto_put_cancel_request_bytes(b, pid, bytes, sizeof(bytes));
}
