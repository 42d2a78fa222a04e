/*
 * fuzz_startup.c - libFuzzer target: the byte stream a client sends, framed
 * as pgvalve frames it. First untyped startup-phase packets (SSLRequest,
 * GSSENCRequest, CancelRequest, StartupMessage) bounded by
 * PROTO_STARTUP_MAX, then, after a StartupMessage, typed messages bounded by
 * the login limit pgvalve uses (8192). Each complete message is read with
 * the bounded readers the way client.c, auth.c and server.c read them.
 */
#include "fuzz.h"
#include "proto.h"

#define FUZZ_LOGIN_MAX_PACKET 8192	/* client.c's limit while logging in */

static void read_startup(const struct pkt *pkt)
{
	struct startup_params sp;
	const char *err = NULL;
	struct pkt_reader r;

	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint32_t code = pkt_get_uint32(&r);
	if (code == PROTO_CANCEL_REQUEST) {
		(void)pkt_get_uint32(&r);
		(void)pkt_get_uint32(&r);
		return;
	}
	if (!proto_parse_startup(pkt_body(pkt), pkt_body_len(pkt), &sp, &err)) {
		FUZZ_CHECK(err != NULL);
		return;
	}
	FUZZ_CHECK(sp.count >= 0 && sp.count <= STARTUP_MAX_PARAMS);
	/* Every name and value must be a string inside the packet. */
	const uint8_t *end = pkt->data + pkt->len;
	for (int i = 0; i < sp.count; i++) {
		FUZZ_CHECK((const uint8_t *)sp.names[i] >= pkt_body(pkt) &&
			   (const uint8_t *)sp.names[i] + strlen(sp.names[i]) < end);
		FUZZ_CHECK((const uint8_t *)sp.values[i] >= pkt_body(pkt) &&
			   (const uint8_t *)sp.values[i] + strlen(sp.values[i]) < end);
	}
	(void)startup_param(&sp, "user");
	(void)startup_param(&sp, "database");
}

/* Reads fields until the reader runs out, the way the message's owner would. */
static void read_typed(const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));

	switch (pkt->type) {
	case 'E':
	case 'N':
		(void)proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'C');
		(void)proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'M');
		break;
	case 'p':	/* PasswordMessage, SASLInitialResponse, SASLResponse */
		(void)pkt_get_string(&r);
		if (pkt_remaining(&r) >= 4) {
			uint32_t n = pkt_get_uint32(&r);
			(void)pkt_get_bytes(&r, n);
		}
		break;
	case 'P':	/* Parse: name, query, parameter types */
		(void)pkt_get_string(&r);
		(void)pkt_get_string(&r);
		for (uint16_t n = pkt_get_uint16(&r); n > 0 && !r.failed; n--)
			(void)pkt_get_uint32(&r);
		break;
	default:
		while (!r.failed && pkt_remaining(&r) > 0) {
			(void)pkt_get_byte(&r);
			(void)pkt_get_string(&r);
		}
		break;
	}
	FUZZ_CHECK(r.pos <= r.len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t left = size;
	bool startup = true;

	while (left > 0) {
		struct pkt pkt;
		uint32_t avail = left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
		uint32_t max = startup ? PROTO_STARTUP_MAX : FUZZ_LOGIN_MAX_PACKET;
		enum proto_header_result res = proto_parse_header(p, avail, startup, max, &pkt);

		if (res != PROTO_HDR_OK)
			break;
		FUZZ_CHECK(pkt.data == p);
		FUZZ_CHECK(pkt.len >= (startup ? PROTO_STARTUP_HEADER_LEN : PROTO_HEADER_LEN));
		FUZZ_CHECK(pkt.len <= max);
		FUZZ_CHECK(pkt.avail <= pkt.len && pkt.avail <= avail);
		if (!pkt_complete(&pkt))
			break;
		if (startup) {
			read_startup(&pkt);
			/* After a StartupMessage the stream switches to typed messages. */
			if (pkt.len >= 8 && ((uint32_t)p[4] << 24 | (uint32_t)p[5] << 16) == PROTO_VERSION_3)
				startup = false;
		} else {
			read_typed(&pkt);
		}
		p += pkt.len;
		left -= pkt.len;
	}
	return 0;
}
