/*
 * netbuf.h - one socket, its input buffer and its output queue, driven by
 * one libevent event.
 *
 * Contract with the owner (client.c, server.c):
 *  - The netbuf reads, frames messages (proto.h) and calls the owner's
 *    handler with NETBUF_EV_PACKET for each header. Inside that call the
 *    owner decides, by calling exactly one of:
 *        netbuf_forward(nb, len)  the message goes to nb->dst unchanged
 *        netbuf_skip(nb, len)     the message is consumed and dropped
 *        netbuf_pause(nb)         stop; the same message is offered again
 *                                 after netbuf_resume()
 *    or none of them, which means "I need the whole message in the
 *    buffer": the netbuf reads on and offers it again when complete.
 *  - Forwarded bytes are sent straight from this buffer to the peer's
 *    socket, batched into one send() per read. What the peer's socket does
 *    not take is queued on the peer (netbuf_queue_len); when that queue is
 *    over its limit the sender stops reading until it drains.
 *  - Bytes pgvalve makes itself go out with netbuf_send(), after anything
 *    already forwarded to that socket, so replies never overtake data.
 *  - A message rewritten on its way (netbuf_replace) or bytes pgvalve adds
 *    to a forwarded stream (netbuf_insert) join the same batch: the
 *    buffer's bytes and the made ones leave in one send() (sendmsg with
 *    several pieces), so a rewrite costs no extra system call.
 *  - The handler returns false when it has closed or freed the owner; the
 *    netbuf then touches nothing more.
 * Input buffers come from a per-process free list and are returned as soon
 * as they are empty, so an idle connection holds no buffer at all.
 */
#ifndef PGVALVE_NETBUF_H
#define PGVALVE_NETBUF_H

#include "common.h"
#include "proto.h"
#include "tls.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <sys/socket.h>
#include <openssl/ssl.h>

struct netbuf;
struct netbuf_io;

enum netbuf_event {
	NETBUF_EV_PACKET,		/* pkt holds a header (and maybe more) */
	NETBUF_EV_BAD_PACKET,		/* a header with an impossible length; pkt NULL */
	NETBUF_EV_RECV_FAILED,		/* peer closed or read error */
	NETBUF_EV_SEND_FAILED,		/* write error on this socket */
	NETBUF_EV_CONNECT_OK,
	NETBUF_EV_CONNECT_FAILED,
	NETBUF_EV_DRAINED,		/* the output queue became empty (only if asked) */
	NETBUF_EV_TLS_READY,		/* the TLS handshake finished */
	NETBUF_EV_TLS_FAILED,		/* the TLS handshake failed (reason logged) */
	NETBUF_EV_DIRECT_TLS,		/* a new client opened with a TLS ClientHello (detect_tls) */
};

typedef bool (*netbuf_handler_fn)(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt);

/*
 * The longest message a netbuf takes (its header check): one of a few
 * limits, so that each netbuf spends 3 bits on it, not a word.
 */
enum netbuf_limit {
	NETBUF_LIMIT_STARTUP,		/* PROTO_STARTUP_MAX: a client's startup packet */
	NETBUF_LIMIT_AUTH,		/* PROTO_AUTH_MSG_MAX: a client's password messages */
	NETBUF_LIMIT_CLIENT,		/* max_packet_size (netbuf_set_client_limit): a logged-in client */
	NETBUF_LIMIT_PEER,		/* 1024: a cancel request's peer */
	NETBUF_LIMIT_NONE,		/* INT32_MAX: a server */
	NETBUF_LIMITS
};

/*
 * The loop's event priorities (loop.c sets them up; libevent runs the
 * lowest number first, one priority a turn of the loop): everything but
 * logins at libevent's default, the middle one, so established traffic
 * first; then logins: a login's socket events (its TLS handshake, startup
 * and password messages), the listeners' accepts and the login gate's
 * turns (login_gate.h), which in a storm decides which logins run and in
 * what order.
 */
#define NETBUF_PRIORITIES 3
#define NETBUF_PRIORITY_LOGIN 2

/* A client's login is over (or begins its passwords): its limit, and its events' priority with it. */
void netbuf_set_limit(struct netbuf *nb, enum netbuf_limit limit);

/*
 * Tens of thousands of idle clients each carry one, so it holds only what
 * an idle socket needs: buffers, queues, the peers it is forwarding with
 * and TLS state live in a side structure (netbuf.c's struct netbuf_io),
 * attached while there is any and given back when there is none.
 */
struct netbuf {
	struct event ev;
	int fd;
	uint32_t pkt_remaining;		/* bytes of the current message still to pass */
	int16_t last_errno;		/* of a failed connect, read or write (errno values fit) */
	uint8_t ev_registered;		/* flags currently added to the loop (EV_READ, EV_WRITE), 0 if none */
	uint8_t run_flags;		/* on the run queue, and why */
	uint8_t handler_slot;		/* the owner's handler, in netbuf.c's table */
	enum netbuf_limit limit : 3;	/* header validation limit, whole message */
	/* One bit each. */
	bool paused : 1;		/* the owner stopped reading */
	bool blocked : 1;		/* stopped because dst's queue is full */
	bool read_fired_paused : 1;	/* readable while paused: read interest dropped */
	bool read_more : 1;		/* the last read filled the buffer: more is likely waiting */
	bool connecting : 1;
	bool send_failed : 1;
	bool startup : 1;		/* untyped startup-phase packets expected */
	bool decided : 1;		/* the handler took an action for the offered packet */
	bool want_drained : 1;		/* deliver NETBUF_EV_DRAINED */
	bool detect_tls : 1;		/* peek the first byte of a new client for a TLS ClientHello */
	bool expect_byte : 1;		/* offer the next single byte as a 1-byte message (SSLRequest answer) */
	bool tls_handshaking : 1;
	bool tls_hello : 1;		/* an accepted client's handshake waits for its ClientHello (login_gate.h) */
	bool gated : 1;			/* a login's event parked by the login gate: off the loop until its turn */
	bool tls_read_wants_write : 1;	/* SSL_read needs the socket writable */
	bool tls_write_wants_read : 1;	/* SSL_write needs the socket readable */
	bool pkt_forward : 1;		/* the rest of the message is forwarded (else skipped) */
	struct netbuf *dst;		/* where forwarded bytes go */
	struct netbuf_io *io;		/* NULL when it has no buffer, queue, feeder, blocked source or TLS */
};

/* Process-wide setup: the buffer size (pkt_buf), reads per wake-up (sbuf_loopcnt), the loop. */
void netbuf_global_init(struct event_base *base, uint32_t buf_size);
void netbuf_set_loopcnt(int loopcnt);
/* tcp_socket_buffer: no send() is handed more than this many bytes at once (0: any; see netbuf.c). */
void netbuf_set_write_chunk(uint32_t bytes);
/* max_packet_size, for NETBUF_LIMIT_CLIENT (at load and reload: every logged-in client follows it). */
void netbuf_set_client_limit(uint32_t max_packet);
void netbuf_global_cleanup(void);
/* Buffers held in the free list and in use, for SHOW MEM. */
void netbuf_buffer_stats(uint32_t *free_count, uint32_t *used_count, uint32_t *size);

void netbuf_init(struct netbuf *nb, netbuf_handler_fn handler, enum netbuf_limit limit);
/* Takes an accepted non-blocking socket and starts reading. */
void netbuf_accept(struct netbuf *nb, int fd);
/*
 * Reads now instead of at the next loop turn: for a socket known to have
 * data (accepted with TCP_DEFER_ACCEPT). The owner may be closed on return.
 */
void netbuf_read_now(struct netbuf *nb);
/* Starts a non-blocking connect; CONNECT_OK/CONNECT_FAILED follow. -1 on immediate failure (errno). */
int netbuf_connect(struct netbuf *nb, const struct sockaddr *sa, socklen_t salen);
/*
 * The same with tune(fd) run on the socket before connect(): buffer sizes
 * must be set before the handshake, where the TCP window scale is agreed
 * on (set after it, a small receive buffer gets windows the peer cannot
 * use, and every few KB wait for a 200 ms probe).
 */
int netbuf_connect_tuned(struct netbuf *nb, const struct sockaddr *sa, socklen_t salen, void (*tune)(int fd));
/* Closes the socket, frees buffers, detaches from peers. Safe to call twice. */
void netbuf_close(struct netbuf *nb);

void netbuf_forward(struct netbuf *nb, uint32_t len);
/*
 * Like netbuf_forward(nb, len), but the message's first `cut` bytes (which
 * must be in the buffer) are replaced by data[dlen] on their way to dst;
 * cut == len replaces the whole message. The rest goes unchanged from the
 * buffer. Without a dst the message is dropped.
 */
void netbuf_replace(struct netbuf *nb, uint32_t len, uint32_t cut, const void *data, uint32_t dlen);
/*
 * Bytes pgvalve made, for nb->dst, placed in nb's forwarded stream at this
 * point: after what nb forwarded so far, before what it forwards next.
 * Sent with nb's next flush of what it forwarded (at once when nb has no
 * input buffer); dropped without a dst.
 */
void netbuf_insert(struct netbuf *nb, const void *data, uint32_t dlen);
void netbuf_skip(struct netbuf *nb, uint32_t len);
/*
 * Puts data (whole messages) back before nb's unread input, between
 * messages: they are offered again, first, once nb reads on (the read
 * balancer running a refused statement again elsewhere).
 */
void netbuf_unread(struct netbuf *nb, const void *data, uint32_t len);
void netbuf_pause(struct netbuf *nb);
/* Resumes reading; buffered messages are offered again from the event loop, not from this call. */
void netbuf_resume(struct netbuf *nb);
/* Sets the forwarding target (NULL: forwarded bytes are dropped). */
void netbuf_set_dst(struct netbuf *nb, struct netbuf *dst);

/*
 * Starts a TLS handshake on the socket (nothing may be buffered either
 * way); takes ownership of ssl. TLS_READY or TLS_FAILED follow.
 */
int netbuf_start_tls(struct netbuf *nb, SSL *ssl, bool accept);

/* Sends bytes pgvalve generated; false if the socket is already broken. */
bool netbuf_send(struct netbuf *nb, const void *data, uint32_t len);
/* Bytes waiting to be written to this socket. */
uint32_t netbuf_queue_len(const struct netbuf *nb);
/* Unparsed bytes buffered from this socket. */
uint32_t netbuf_buffered(const struct netbuf *nb);
/* Pushes out forwarded bytes still held in nb's buffer (before a release or a generated reply). */
void netbuf_flush_forwarded(struct netbuf *nb);
/*
 * OpenSSL's connection while OpenSSL has it: NULL on plain text, and for
 * a TLS 1.3 client once tls_record.h took its record layer over after the
 * handshake (which it does only without a client certificate).
 */
SSL *netbuf_ssl(const struct netbuf *nb);
/* Whether the connection is TLS, whoever runs its record layer. */
bool netbuf_is_tls(const struct netbuf *nb);
/* tls_describe()'s text, the ALPN check and tls_server_end_point(), for either kind. */
void netbuf_tls_describe(const struct netbuf *nb, char *buf, size_t size);
bool netbuf_tls_alpn_postgresql(const struct netbuf *nb);
/* The SNI host name a TLS client sent, NULL without one (or without TLS). */
const char *netbuf_tls_servername(const struct netbuf *nb);
size_t netbuf_tls_server_end_point(const struct netbuf *nb, uint8_t out[TLS_END_POINT_MAX]);
/* Why the last TLS handshake failed: valid during the TLS_FAILED event. */
const char *netbuf_tls_error(void);
/* The handler nb was made with (netbuf_init). */
netbuf_handler_fn netbuf_handler(const struct netbuf *nb);

static inline bool netbuf_is_open(const struct netbuf *nb) { return nb->fd >= 0; }

#endif
