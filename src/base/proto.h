/*
 * proto.h - PostgreSQL v3 wire protocol: framing, parsing and building
 * messages. No I/O and no connection state: callers own the bytes.
 *
 * Every length taken from the network is validated here before anyone uses
 * it: a header whose length is below 4 or above the caller's limit is
 * reported as invalid, and readers never step past the end of a message.
 */
#ifndef PGVALVE_PROTO_H
#define PGVALVE_PROTO_H

#include "common.h"

#define PROTO_VERSION_3		196608		/* 3.0 */
#define PROTO_VERSION_3_2	196610		/* 3.2 (PostgreSQL 18): cancel keys up to 256 bytes */
#define PROTO_CANCEL_REQUEST	80877102
#define PROTO_SSL_REQUEST	80877103
#define PROTO_GSSENC_REQUEST	80877104
#define PROTO_STARTUP_MAX	10000		/* PostgreSQL's MAX_STARTUP_PACKET_LENGTH */
#define PROTO_HEADER_LEN	5		/* type byte + int32 length */
/*
 * The longest password or SASL message of a login, whole: a body of
 * PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH (65535 bytes, which it checks
 * against the length less its own 4 bytes), with the type byte and the
 * length. A password longer than pgvalve takes (AUTH_SECRET_MAX) is then a
 * wrong password, as in PgBouncer, not a bad packet.
 */
#define PROTO_AUTH_MSG_MAX	(65535 + PROTO_HEADER_LEN)
#define PROTO_STARTUP_HEADER_LEN 8		/* int32 length + int32 code */

/* Authentication request codes (the int32 after 'R'). */
enum {
	AUTH_REQ_OK = 0,
	AUTH_REQ_CLEARTEXT = 3,
	AUTH_REQ_MD5 = 5,
	AUTH_REQ_GSS = 7,
	AUTH_REQ_GSS_CONTINUE = 8,
	AUTH_REQ_SASL = 10,
	AUTH_REQ_SASL_CONTINUE = 11,
	AUTH_REQ_SASL_FINAL = 12,
};

/* A message as seen in a buffer: maybe only its first bytes are there yet. */
struct pkt {
	uint8_t type;		/* 0 for the untyped startup-phase packets */
	uint32_t len;		/* whole message, including type byte and length */
	const uint8_t *data;	/* first byte of the message */
	uint32_t avail;		/* bytes of it present in the buffer (<= len) */
};

static inline bool pkt_complete(const struct pkt *p) { return p->avail >= p->len; }
/* Payload: the bytes after the header. Only valid when the packet is complete. */
static inline const uint8_t *pkt_body(const struct pkt *p) { return p->data + (p->type ? 5 : 4); }
static inline uint32_t pkt_body_len(const struct pkt *p) { return p->len - (p->type ? 5 : 4); }
/* A big-endian uint32 at p (a PID, a length), with no reader around it. */
static inline uint32_t proto_read_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

enum proto_header_result {
	PROTO_HDR_OK = 1,
	PROTO_HDR_NEED_MORE = 0,
	PROTO_HDR_INVALID = -1,
};

/*
 * Reads a header from buf. `startup` selects the untyped form used before
 * login. max_len bounds the whole message. Fills pkt on PROTO_HDR_OK.
 */
enum proto_header_result proto_parse_header(const uint8_t *buf, uint32_t avail, bool startup,
					    uint32_t max_len, struct pkt *pkt);

/* Bounded reader over one message body. Any overrun sets failed and returns zero/NULL. */
struct pkt_reader {
	const uint8_t *data;
	uint32_t len;
	uint32_t pos;
	bool failed;
};

void pkt_reader_init(struct pkt_reader *r, const uint8_t *data, uint32_t len);
uint8_t pkt_get_byte(struct pkt_reader *r);
uint16_t pkt_get_uint16(struct pkt_reader *r);
uint32_t pkt_get_uint32(struct pkt_reader *r);
/* A NUL-terminated string inside the message, or NULL (and failed) if unterminated. */
const char *pkt_get_string(struct pkt_reader *r);
const uint8_t *pkt_get_bytes(struct pkt_reader *r, uint32_t n);
static inline uint32_t pkt_remaining(const struct pkt_reader *r) { return r->len - r->pos; }

/* The parameters of a StartupMessage. */
#define STARTUP_MAX_PARAMS 64
struct startup_params {
	uint32_t version;
	int count;
	const char *names[STARTUP_MAX_PARAMS];
	const char *values[STARTUP_MAX_PARAMS];
};
/*
 * Parses the body of a StartupMessage (after length and version). Strings
 * point into the packet. Returns false with *err set on malformed input.
 */
bool proto_parse_startup(const uint8_t *body, uint32_t len, struct startup_params *sp, const char **err);
const char *startup_param(const struct startup_params *sp, const char *name);

/*
 * A growable message builder. Messages are appended one after another;
 * pktbuf_begin() starts one, pktbuf_end() patches its length.
 * With a fixed buffer (pktbuf_init_fixed) running out of room sets failed.
 */
struct pktbuf {
	uint8_t *buf;
	uint32_t len;
	uint32_t size;
	uint32_t msg_start;
	bool msg_typed;
	bool fixed;
	bool failed;
};

void pktbuf_init(struct pktbuf *b, uint32_t initial);
void pktbuf_init_fixed(struct pktbuf *b, uint8_t *mem, uint32_t size);
void pktbuf_free(struct pktbuf *b);
void pktbuf_reset(struct pktbuf *b);
void pktbuf_begin(struct pktbuf *b, uint8_t type);	/* type 0: untyped startup packet */
void pktbuf_end(struct pktbuf *b);
/* Ends a message whose last `more` bytes are not in b: they follow it from elsewhere. */
void pktbuf_end_before(struct pktbuf *b, uint32_t more);
/* Slow path of the appenders: grows the buffer or marks it failed. */
void pktbuf_put_bytes_slow(struct pktbuf *b, const void *data, uint32_t len);

static inline void pktbuf_put_bytes(struct pktbuf *b, const void *data, uint32_t len)
{
	if (LIKELY(!b->failed && b->size - b->len >= len)) {
		memcpy(b->buf + b->len, data, len);
		b->len += len;
	} else {
		pktbuf_put_bytes_slow(b, data, len);
	}
}

static inline void pktbuf_put_byte(struct pktbuf *b, uint8_t v)
{
	pktbuf_put_bytes(b, &v, 1);
}

static inline void pktbuf_put_uint16(struct pktbuf *b, uint16_t v)
{
	uint8_t tmp[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	pktbuf_put_bytes(b, tmp, 2);
}

static inline void pktbuf_put_uint32(struct pktbuf *b, uint32_t v)
{
	uint8_t tmp[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	pktbuf_put_bytes(b, tmp, 4);
}

/* With the NUL. */
static inline void pktbuf_put_string(struct pktbuf *b, const char *s)
{
	pktbuf_put_bytes(b, s, (uint32_t)strlen(s) + 1);
}

/* Whole messages. */
void proto_put_error(struct pktbuf *b, const char *severity, const char *sqlstate, const char *message);
void proto_put_notice(struct pktbuf *b, const char *sqlstate, const char *message);
void proto_put_auth_request(struct pktbuf *b, uint32_t code, const void *extra, uint32_t extra_len);
void proto_put_parameter_status(struct pktbuf *b, const char *name, const char *value);
void proto_put_backend_key(struct pktbuf *b, uint32_t pid, uint32_t key);
/* BackendKeyData with a key of key_len bytes (protocol 3.2). */
void proto_put_backend_key_bytes(struct pktbuf *b, uint32_t pid, const uint8_t *key, uint32_t key_len);
/*
 * NegotiateProtocolVersion: the newest version spoken for the client's
 * major version, as the whole number (3.0 is 196608: what PostgreSQL sends
 * and libpq reads), and the protocol options not recognized.
 */
void proto_put_negotiate_version(struct pktbuf *b, uint32_t version, const char *const *options, int count);
/* The 16-byte untyped CancelRequest a new connection sends. */
void proto_put_cancel_request(struct pktbuf *b, uint32_t pid, uint32_t key);
/* A CancelRequest with a key of key_len bytes (12 + key_len in all; protocol 3.2's long keys). */
void proto_put_cancel_request_bytes(struct pktbuf *b, uint32_t pid, const uint8_t *key, uint32_t key_len);
void proto_put_ready(struct pktbuf *b, char status);
void proto_put_query(struct pktbuf *b, const char *sql);
void proto_put_password(struct pktbuf *b, const char *password);
void proto_put_terminate(struct pktbuf *b);

/*
 * Finds one field of an ErrorResponse/NoticeResponse body ('C' for SQLSTATE,
 * 'M' for the message). Returns NULL when absent or malformed.
 */
const char *proto_error_field(const uint8_t *body, uint32_t len, char field);

/* Quotes a value as a SQL string literal into out ('...' with doubled quotes). false if it does not fit. */
bool proto_quote_literal(const char *value, char *out, size_t size);

#endif
