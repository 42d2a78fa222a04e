/*
 * netbuf.c - socket I/O for every connection: read, frame, forward, queue.
 *
 * Owns the input buffers (a per-process free list), the output queues and
 * the libevent registration of each socket. It knows nothing about
 * clients, servers or pools: decisions about a message belong to the
 * owner's handler (see netbuf.h for the contract).
 *
 * Re-entrancy rule: a handler may act on other netbufs (forward to them,
 * send to them, resume them) but the netbuf layer never calls another
 * connection's handler from inside a handler. Anything that would
 * (resuming a paused reader, reporting a write error found while
 * forwarding) is put on the run queue and handled from the loop.
 */
#include "common.h"
#include "netbuf.h"
#include "login_gate.h"
#include "log.h"
#include "tls_record.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <openssl/err.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

struct iobuf {
	struct iobuf *next_free;
	uint32_t size;
	uint32_t start;		/* first byte not yet sent or skipped */
	uint32_t pos;		/* first byte not yet decided; [start,pos) is forwarded, unsent */
	uint32_t end;		/* end of received bytes */
	bool pooled;
	uint8_t data[];
};

struct outq {
	uint32_t start;
	uint32_t end;
	uint32_t size;
	uint8_t data[];
};

/*
 * What a netbuf holds only while it has something to hold (see netbuf.h):
 * taken from a free list when the first of these is set, given back by
 * io_trim() once none is. Nothing keeps a pointer to one across a call
 * that may trim it: it is always reached through nb->io.
 */
struct netbuf_io {
	struct netbuf_io *next_free;
	struct iobuf *in;
	struct outq *out;
	struct netbuf *feeder;		/* a source with unsent forwarded bytes for us */
	struct netbuf *blocked_src;	/* a source paused until our queue drains */
	SSL *ssl;			/* OpenSSL's TLS; NULL: plain text, or rec */
	struct tls_record *rec;		/* TLS 1.3 after the handshake, without OpenSSL (tls_record.h) */
	short tls_want;			/* handshake: events it waits for */
	struct login_gate_entry *gate;	/* parked by the login gate (nb->gated) */
};

static inline struct iobuf *nb_in(const struct netbuf *nb)
{
	return nb->io ? nb->io->in : NULL;
}

static inline struct outq *nb_out(const struct netbuf *nb)
{
	return nb->io ? nb->io->out : NULL;
}

static inline struct netbuf *nb_feeder(const struct netbuf *nb)
{
	return nb->io ? nb->io->feeder : NULL;
}

static inline struct netbuf *nb_blocked_src(const struct netbuf *nb)
{
	return nb->io ? nb->io->blocked_src : NULL;
}

/*
 * Decrypted bytes OpenSSL holds for nb: no socket event announces them,
 * so a reader that stopped with some there must be read again by hand.
 */
static bool tls_pending(const struct netbuf *nb)
{
	if (!nb->io || nb->fd < 0 || nb->tls_handshaking)
		return false;
	if (nb->io->rec)
		return tls_record_pending(nb->io->rec) > 0;
	return nb->io->ssl && SSL_pending(nb->io->ssl) > 0;
}

/* TLS, by OpenSSL or by tls_record. */
static inline bool nb_is_tls(const struct netbuf *nb)
{
	return nb->io && (nb->io->ssl || nb->io->rec);
}

/* Up to this many distinct handlers (owners: client, server, cancel requests, ...). */
#define HANDLERS_MAX 8

/*
 * Process-wide state of this module (documented globals): the loop, the
 * buffer free list, and the run queue of netbufs to revisit.
 */
static struct {
	struct event_base *base;
	uint32_t buf_size;
	uint32_t queue_limit;
	int loopcnt;		/* sbuf_loopcnt: buffers read per wake-up before others get a turn */
	uint32_t write_chunk;	/* tcp_socket_buffer: most bytes one send() is handed (0: no limit) */
	uint32_t limits[NETBUF_LIMITS];	/* by enum netbuf_limit */
	struct iobuf *free_list;
	uint32_t free_count;
	uint32_t used_count;
	struct netbuf_io *io_free_list;
	netbuf_handler_fn handlers[HANDLERS_MAX];
	uint8_t handler_count;
	char tls_error[200];	/* the last handshake failure, for the owner's log line */
	struct event *run_ev;
	struct netbuf **runq;
	uint32_t runq_len;
	uint32_t runq_size;
} nbg;

/*
 * Rewrites of one source's forwarded bytes (netbuf_replace, netbuf_insert),
 * kept until that source's next flush: cut i drops the buffer's bytes
 * [from, to) and puts ins[ins_off, ins_off + ins_len) in their place. Only
 * forwarded bytes not yet sent are ever cut, and they exist only while
 * their source is being processed, so one source at a time has cuts; a
 * second one flushes the first.
 */
#define REWRITE_MAX_CUTS 16
#define REWRITE_KEEP (64 * 1024)	/* made bytes buffer kept between flushes up to this size */
static struct {
	struct netbuf *owner;
	uint32_t ncuts;
	struct rewrite_cut {
		uint32_t from, to;
		uint32_t ins_off, ins_len;
	} cut[REWRITE_MAX_CUTS];
	uint8_t *ins;
	uint32_t ins_len;
	uint32_t ins_size;
} rewrites;

/* Marks on a netbuf that is on the run queue. */
#define RUN_PROCESS 1
#define RUN_SEND_FAILED 2
#define RUN_READ 4		/* TLS holds decrypted bytes the socket will not signal */

static void netbuf_event_cb(evutil_socket_t fd, short what, void *arg);
static void sync_events(struct netbuf *nb);
static void runq_add(struct netbuf *nb, uint8_t what);
static void run_queue_cb(evutil_socket_t fd, short what, void *arg);
static void gate_run(void *owner, short what);

/* ---------------------------------------------------------------- buffers */

void netbuf_global_init(struct event_base *base, uint32_t buf_size)
{
	nbg.base = base;
	nbg.limits[NETBUF_LIMIT_STARTUP] = PROTO_STARTUP_MAX;
	nbg.limits[NETBUF_LIMIT_AUTH] = PROTO_AUTH_MSG_MAX;
	if (!nbg.limits[NETBUF_LIMIT_CLIENT])
		nbg.limits[NETBUF_LIMIT_CLIENT] = INT32_MAX;
	nbg.limits[NETBUF_LIMIT_PEER] = 1024;
	nbg.limits[NETBUF_LIMIT_NONE] = INT32_MAX;
	nbg.buf_size = buf_size < 1024 ? 1024 : buf_size;
	/* A slow reader may hold this much forwarded data before its source stops reading. */
	nbg.queue_limit = MAX(nbg.buf_size * 4, 64 * 1024);
	if (!nbg.run_ev) {
		nbg.run_ev = event_new(base, -1, 0, run_queue_cb, NULL);
		login_gate_init(base, NETBUF_PRIORITY_LOGIN, gate_run);
	}
}

void netbuf_set_loopcnt(int loopcnt)
{
	nbg.loopcnt = loopcnt;
}

void netbuf_set_write_chunk(uint32_t bytes)
{
	nbg.write_chunk = bytes;
}

void netbuf_set_client_limit(uint32_t max_packet)
{
	nbg.limits[NETBUF_LIMIT_CLIENT] = MAX(MIN(max_packet, (uint32_t)INT32_MAX), (uint32_t)PROTO_HEADER_LEN);
}

void netbuf_global_cleanup(void)
{
	while (nbg.free_list) {
		struct iobuf *b = nbg.free_list;
		nbg.free_list = b->next_free;
		free(b);
	}
	nbg.free_count = 0;
	while (nbg.io_free_list) {
		struct netbuf_io *io = nbg.io_free_list;
		nbg.io_free_list = io->next_free;
		free(io);
	}
	if (nbg.run_ev) {
		event_free(nbg.run_ev);
		login_gate_cleanup();
	}
	nbg.run_ev = NULL;
	free(nbg.runq);
	nbg.runq = NULL;
	nbg.runq_len = nbg.runq_size = 0;
	free(rewrites.ins);
	memset(&rewrites, 0, sizeof(rewrites));
}

void netbuf_buffer_stats(uint32_t *free_count, uint32_t *used_count, uint32_t *size)
{
	*free_count = nbg.free_count;
	*used_count = nbg.used_count;
	*size = nbg.buf_size;
}

static struct iobuf *iobuf_get(void)
{
	struct iobuf *b = nbg.free_list;
	if (b) {
		nbg.free_list = b->next_free;
		nbg.free_count--;
	} else {
		b = xmalloc(sizeof(*b) + nbg.buf_size);
		b->size = nbg.buf_size;
		b->pooled = true;
	}
	b->start = b->pos = b->end = 0;
	b->next_free = NULL;
	nbg.used_count++;
	return b;
}

static void iobuf_put(struct iobuf *b)
{
	nbg.used_count--;
	if (!b->pooled) {
		free(b);
		return;
	}
	b->next_free = nbg.free_list;
	nbg.free_list = b;
	nbg.free_count++;
}

SSL *netbuf_ssl(const struct netbuf *nb)
{
	return nb->io ? nb->io->ssl : NULL;
}

bool netbuf_is_tls(const struct netbuf *nb)
{
	return nb_is_tls(nb);
}

void netbuf_tls_describe(const struct netbuf *nb, char *buf, size_t size)
{
	if (nb->io && nb->io->rec)
		snprintf(buf, size, "%s", tls_record_describe(nb->io->rec));
	else
		tls_describe(netbuf_ssl(nb), buf, size);
}

bool netbuf_tls_alpn_postgresql(const struct netbuf *nb)
{
	if (nb->io && nb->io->rec)
		return tls_record_alpn_postgresql(nb->io->rec);
	return tls_alpn_postgresql(netbuf_ssl(nb));
}

const char *netbuf_tls_servername(const struct netbuf *nb)
{
	if (nb->io && nb->io->rec)
		return tls_record_servername(nb->io->rec);
	return netbuf_ssl(nb) ? SSL_get_servername(netbuf_ssl(nb), TLSEXT_NAMETYPE_host_name) : NULL;
}

size_t netbuf_tls_server_end_point(const struct netbuf *nb, uint8_t out[TLS_END_POINT_MAX])
{
	if (nb->io && nb->io->rec)
		return tls_ctx_server_end_point(tls_record_ctx(nb->io->rec), out);
	return tls_server_end_point(netbuf_ssl(nb), out);
}

/* nb's side structure, attached if it had none. */
static struct netbuf_io *nb_io(struct netbuf *nb)
{
	if (nb->io)
		return nb->io;
	struct netbuf_io *io = nbg.io_free_list;
	if (io)
		nbg.io_free_list = io->next_free;
	else
		io = xmalloc(sizeof(*io));
	memset(io, 0, sizeof(*io));
	nb->io = io;
	return io;
}

/* Gives nb's side structure back once it holds nothing. */
static void io_trim(struct netbuf *nb)
{
	struct netbuf_io *io = nb->io;
	if (!io || io->in || io->out || io->feeder || io->blocked_src || io->ssl || io->rec || io->tls_want ||
	    io->gate)
		return;
	nb->io = NULL;
	io->next_free = nbg.io_free_list;
	nbg.io_free_list = io;
}

/* nb holds unsent bytes forwarded to dst (a closed dst drops them when they are flushed). */
static void set_feeder(struct netbuf *dst, struct netbuf *nb)
{
	if (dst->fd >= 0)
		nb_io(dst)->feeder = nb;
}

/* dst no longer has nb as its feeder. */
static void drop_feeder(struct netbuf *dst, const struct netbuf *nb)
{
	if (nb_feeder(dst) == nb) {
		dst->io->feeder = NULL;
		io_trim(dst);
	}
}

/* ---------------------------------------------------------------- handlers */

static uint8_t handler_slot(netbuf_handler_fn fn)
{
	for (uint8_t i = 0; i < nbg.handler_count; i++)
		if (nbg.handlers[i] == fn)
			return i;
	if (nbg.handler_count == HANDLERS_MAX)
		die("internal: more than %d netbuf handlers", HANDLERS_MAX);
	nbg.handlers[nbg.handler_count] = fn;
	return nbg.handler_count++;
}

netbuf_handler_fn netbuf_handler(const struct netbuf *nb)
{
	return nbg.handlers[nb->handler_slot];
}

/* Tells nb's owner about ev; false if the owner was closed. */
static bool notify(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	return nbg.handlers[nb->handler_slot](nb, ev, pkt);
}

const char *netbuf_tls_error(void)
{
	return nbg.tls_error;
}

/* ---------------------------------------------------------------- run queue */

static void runq_add(struct netbuf *nb, uint8_t what)
{
	if (!nb->run_flags) {
		if (nbg.runq_len == nbg.runq_size) {
			nbg.runq_size = nbg.runq_size ? nbg.runq_size * 2 : 64;
			nbg.runq = xrealloc(nbg.runq, nbg.runq_size * sizeof(*nbg.runq));
		}
		nbg.runq[nbg.runq_len++] = nb;
		if (nbg.runq_len == 1)
			event_active(nbg.run_ev, 0, 0);
	}
	nb->run_flags |= what;
}

static void runq_remove(struct netbuf *nb)
{
	if (!nb->run_flags)
		return;
	nb->run_flags = 0;
	for (uint32_t i = 0; i < nbg.runq_len; i++) {
		if (nbg.runq[i] == nb) {
			nbg.runq[i] = NULL;	/* the runner skips holes */
			break;
		}
	}
}

/* ---------------------------------------------------------------- events */

static void sync_events(struct netbuf *nb)
{
	short want = 0;

	if (nb->fd < 0 || nb->gated)	/* parked: the login gate puts its event back */
		return;
	if (nb->connecting) {
		want = EV_WRITE;
	} else if (nb->tls_handshaking) {
		want = nb->io->tls_want;
	} else {
		bool stopped = nb->paused || nb->blocked;
		if (!stopped)
			want |= EV_READ;
		else if ((nb->ev_registered & EV_READ) && !nb->read_fired_paused)
			/*
			 * Paused readers keep their registration until the socket
			 * actually fires: a client waiting for a server usually sends
			 * nothing more, and this saves two epoll_ctl calls per wait.
			 */
			want |= EV_READ;
		if (nb_out(nb) && nb->io->out->end > nb->io->out->start)
			want |= EV_WRITE;
		if (nb->tls_read_wants_write)
			want |= EV_WRITE;
		if (nb->tls_write_wants_read)
			want |= EV_READ;
	}
	if (want == nb->ev_registered)
		return;
	if (nb->ev_registered)
		event_del(&nb->ev);
	if (want) {
		event_assign(&nb->ev, nbg.base, nb->fd, want | EV_PERSIST, netbuf_event_cb, nb);
		if (nb->limit <= NETBUF_LIMIT_AUTH)	/* a client logging in: after established traffic */
			event_priority_set(&nb->ev, NETBUF_PRIORITY_LOGIN);
		if (event_add(&nb->ev, NULL) < 0)
			log_error("event_add failed on fd %d", nb->fd);
	}
	nb->ev_registered = (uint8_t)want;
}

void netbuf_set_limit(struct netbuf *nb, enum netbuf_limit limit)
{
	bool was_login = nb->limit <= NETBUF_LIMIT_AUTH, login = limit <= NETBUF_LIMIT_AUTH;
	nb->limit = limit;
	if (was_login != login && nb->ev_registered)	/* not active: its callback is running, or it waits */
		event_priority_set(&nb->ev, login ? NETBUF_PRIORITY_LOGIN : NETBUF_PRIORITIES / 2);
}

/* ---------------------------------------------------------------- socket I/O (plain or TLS) */

/* recv() semantics: >0 bytes, 0 end of stream, -1 with errno (EAGAIN: try later). */
static ssize_t nb_read(struct netbuf *nb, void *buf, size_t len)
{
	if (nb->io && nb->io->rec)
		return tls_record_read(nb->io->rec, nb->fd, buf, len);
	SSL *ssl = netbuf_ssl(nb);
	if (!ssl)
		return recv(nb->fd, buf, len, 0);
	ERR_clear_error();
	int n = SSL_read(ssl, buf, (int)MIN(len, (size_t)INT_MAX));
	if (n > 0) {
		nb->tls_read_wants_write = false;
		return n;
	}
	switch (SSL_get_error(ssl, n)) {
	case SSL_ERROR_WANT_READ:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		nb->tls_read_wants_write = true;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (n == 0 || errno == 0)
			return 0;
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}

/*
 * send() in pieces of write_chunk bytes, while the socket takes them.
 *
 * Why: with a small socket buffer (tcp_socket_buffer = 4096), one send()
 * of a large queue still goes out as one large segment (Linux lets the
 * first write overrun the buffer), after which the socket is full until
 * that segment is acknowledged, and a receiver acknowledges a lone
 * segment only when its delayed-ACK timer fires (40 ms): a COPY or
 * pg_basebackup crawled at one 64 kB segment per 40 ms. Pieces of the
 * buffer's size keep two or more segments in flight, which receivers
 * acknowledge at once, as PgBouncer's pkt_buf-sized writes do.
 */
static ssize_t send_chunked(int fd, const uint8_t *buf, size_t len)
{
	size_t sent = 0;
	while (sent < len) {
		size_t piece = MIN(len - sent, (size_t)nbg.write_chunk);
		ssize_t n = send(fd, buf + sent, piece, MSG_NOSIGNAL);
		if (n < 0)
			return sent ? (ssize_t)sent : -1;
		sent += (size_t)n;
		if ((size_t)n < piece)
			break;
	}
	return (ssize_t)sent;
}

/* send() semantics, partial writes allowed. */
static ssize_t nb_write(struct netbuf *nb, const void *buf, size_t len)
{
	if (nb->io && nb->io->rec)
		return tls_record_write(nb->io->rec, nb->fd, buf, len);
	SSL *ssl = netbuf_ssl(nb);
	if (!ssl && nbg.write_chunk && len > nbg.write_chunk)
		return send_chunked(nb->fd, buf, len);
	if (!ssl)
		return send(nb->fd, buf, len, MSG_NOSIGNAL);
	ERR_clear_error();
	int n = SSL_write(ssl, buf, (int)MIN(len, (size_t)INT_MAX));
	if (n > 0) {
		nb->tls_write_wants_read = false;
		return n;
	}
	switch (SSL_get_error(ssl, n)) {
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_READ:
		nb->tls_write_wants_read = true;
		errno = EAGAIN;
		return -1;
	default:
		if (errno == 0 || errno == EAGAIN)
			errno = EPIPE;
		return -1;
	}
}

void netbuf_init(struct netbuf *nb, netbuf_handler_fn handler, enum netbuf_limit limit)
{
	memset(nb, 0, sizeof(*nb));
	nb->fd = -1;
	nb->handler_slot = handler_slot(handler);
	nb->limit = limit;
}


void netbuf_accept(struct netbuf *nb, int fd)
{
	/* TCP options come from the listener, which Linux copies to accepted sockets. */
	nb->fd = fd;
	nb->paused = false;
	sync_events(nb);
}

int netbuf_connect(struct netbuf *nb, const struct sockaddr *sa, socklen_t salen)
{
	return netbuf_connect_tuned(nb, sa, salen, NULL);
}

int netbuf_connect_tuned(struct netbuf *nb, const struct sockaddr *sa, socklen_t salen, void (*tune)(int fd))
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (tune)
		tune(fd);
	if (connect(fd, sa, salen) < 0 && errno != EINPROGRESS) {
		int save = errno;
		close(fd);
		errno = save;
		return -1;
	}
	nb->fd = fd;
	nb->connecting = true;
	sync_events(nb);
	return 0;
}

/* ---------------------------------------------------------------- output */

static void outq_append(struct netbuf *nb, const uint8_t *data, uint32_t len)
{
	struct netbuf_io *io = nb_io(nb);
	struct outq *q = io->out;
	if (!q) {
		uint32_t size = MAX(len, nbg.buf_size);
		q = xmalloc(sizeof(*q) + size);
		q->start = q->end = 0;
		q->size = size;
		io->out = q;
	} else if (q->size - q->end < len) {
		uint32_t used = q->end - q->start;
		memmove(q->data, q->data + q->start, used);
		q->start = 0;
		q->end = used;
		if (q->size - used < len) {
			uint32_t size = q->size;
			while (size - used < len)
				size *= 2;
			q = xrealloc(q, sizeof(*q) + size);
			q->size = size;
			io->out = q;
		}
	}
	memcpy(q->data + q->end, data, len);
	q->end += len;
}

/* A failed write: false (and dst marked failed) unless it only has to wait. */
static bool write_may_wait(struct netbuf *dst)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return true;
	dst->send_failed = true;
	dst->last_errno = (int16_t)errno;
	runq_add(dst, RUN_SEND_FAILED);
	return false;
}

/* Bytes were queued on dst: wait for writability; stop `src` if the queue is over its limit. */
static void queued(struct netbuf *dst, struct netbuf *src)
{
	sync_events(dst);
	if (src && dst->io->out->end - dst->io->out->start > nbg.queue_limit && !src->blocked) {
		src->blocked = true;
		dst->io->blocked_src = src;
		sync_events(src);
	}
}

/*
 * Writes len bytes to dst's socket, behind whatever is queued there. `src`
 * is the netbuf they came from, if any: it is stopped when dst's queue
 * grows past the limit.
 */
static void deliver(struct netbuf *dst, const uint8_t *data, uint32_t len, struct netbuf *src)
{
	if (dst->fd < 0 || dst->send_failed || len == 0)
		return;
	struct outq *q = nb_out(dst);
	if (!q || q->end == q->start) {
		ssize_t n = dst->tls_handshaking ? (errno = EAGAIN, -1) : nb_write(dst, data, len);
		if (n == (ssize_t)len) {
			return;
		}
		if (n < 0) {
			if (!write_may_wait(dst))
				return;
			n = 0;
		}
		data += n;
		len -= (uint32_t)n;
	}
	outq_append(dst, data, len);
	queued(dst, src);
}

/* TLS: pieces up to one record's worth are joined so that they make one record, one write. */
#define TLS_JOIN_MAX 16384

/* deliver() for several pieces: one sendmsg() on a plain socket with nothing queued. */
static void deliver_iov(struct netbuf *dst, struct iovec *iov, int cnt, struct netbuf *src)
{
	if (dst->fd < 0 || dst->send_failed)
		return;
	size_t total = 0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	struct outq *q = nb_out(dst);
	bool queue_empty = !q || q->end == q->start;
	bool tls = nb_is_tls(dst);
	if (tls && queue_empty && !dst->tls_handshaking && cnt > 1 && total <= TLS_JOIN_MAX) {
		uint8_t joined[TLS_JOIN_MAX];
		size_t at = 0;
		for (int i = 0; i < cnt; i++) {
			memcpy(joined + at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
		deliver(dst, joined, (uint32_t)total, src);
		return;
	}
	if (cnt == 1 || tls || dst->tls_handshaking || !queue_empty || (nbg.write_chunk && total > nbg.write_chunk)) {
		/* A queue takes the pieces in order; a long TLS batch goes record by record; chunks, piece by piece. */
		for (int i = 0; i < cnt; i++)
			deliver(dst, iov[i].iov_base, (uint32_t)iov[i].iov_len, src);
		return;
	}
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
	ssize_t n = sendmsg(dst->fd, &msg, MSG_NOSIGNAL);
	if (n == (ssize_t)total)
		return;
	if (n < 0) {
		if (!write_may_wait(dst))
			return;
		n = 0;
	}
	for (int i = 0; i < cnt; i++) {
		size_t done = MIN((size_t)n, iov[i].iov_len);
		n -= (ssize_t)done;
		if (iov[i].iov_len > done)
			outq_append(dst, (const uint8_t *)iov[i].iov_base + done, (uint32_t)(iov[i].iov_len - done));
	}
	queued(dst, src);
}

/* nb's forwarded bytes with its cuts applied, in one delivery; nb holds the cuts. */
static void rewrites_flush(struct netbuf *nb)
{
	struct iobuf *in = nb_in(nb);
	struct netbuf *dst = nb->dst;
	struct iovec iov[2 * REWRITE_MAX_CUTS + 1];
	int cnt = 0;
	uint32_t at = in->start;

	for (uint32_t i = 0; i < rewrites.ncuts; i++) {
		const struct rewrite_cut *c = &rewrites.cut[i];
		if (c->from > at)
			iov[cnt++] = (struct iovec){ in->data + at, c->from - at };
		if (c->ins_len)
			iov[cnt++] = (struct iovec){ rewrites.ins + c->ins_off, c->ins_len };
		at = c->to;
	}
	if (in->pos > at)
		iov[cnt++] = (struct iovec){ in->data + at, in->pos - at };
	in->start = in->pos;
	rewrites.owner = NULL;
	rewrites.ncuts = 0;
	if (dst) {
		drop_feeder(dst, nb);
		if (cnt)
			deliver_iov(dst, iov, cnt, nb);
	}
	rewrites.ins_len = 0;
	if (rewrites.ins_size > REWRITE_KEEP) {
		/* One huge rewrite must not pin its size for the life of the process. */
		free(rewrites.ins);
		rewrites.ins = NULL;
		rewrites.ins_size = 0;
	}
}

/* Forgets nb's cuts with its unsent forwarded bytes (nb or its dst is closing). */
static void rewrites_drop(struct netbuf *nb)
{
	if (rewrites.owner != nb)
		return;
	rewrites.owner = NULL;
	rewrites.ncuts = 0;
	rewrites.ins_len = 0;
}

/* A cut at nb's parse position: `cut` bytes dropped, data[dlen] in their place. */
static void rewrites_add(struct netbuf *nb, uint32_t cut, const void *data, uint32_t dlen)
{
	if (rewrites.owner && (rewrites.owner != nb || rewrites.ncuts == REWRITE_MAX_CUTS))
		netbuf_flush_forwarded(rewrites.owner);
	if (rewrites.ins_size - rewrites.ins_len < dlen) {
		uint32_t size = rewrites.ins_size ? rewrites.ins_size : 1024;
		while (size - rewrites.ins_len < dlen)
			size *= 2;
		rewrites.ins = xrealloc(rewrites.ins, size);
		rewrites.ins_size = size;
	}
	if (dlen)
		memcpy(rewrites.ins + rewrites.ins_len, data, dlen);
	struct iobuf *in = nb_in(nb);
	rewrites.cut[rewrites.ncuts++] = (struct rewrite_cut){
		.from = in->pos, .to = in->pos + cut, .ins_off = rewrites.ins_len, .ins_len = dlen,
	};
	rewrites.ins_len += dlen;
	rewrites.owner = nb;
	in->pos += cut;
	set_feeder(nb->dst, nb);
}

void netbuf_flush_forwarded(struct netbuf *nb)
{
	if (rewrites.owner == nb) {
		rewrites_flush(nb);
		return;
	}
	struct iobuf *in = nb_in(nb);
	if (!in || in->pos == in->start)
		return;
	const uint8_t *data = in->data + in->start;
	uint32_t len = in->pos - in->start;
	in->start = in->pos;
	struct netbuf *dst = nb->dst;
	if (!dst)
		return;
	drop_feeder(dst, nb);
	deliver(dst, data, len, nb);
}

bool netbuf_send(struct netbuf *nb, const void *data, uint32_t len)
{
	if (nb_feeder(nb))
		netbuf_flush_forwarded(nb->io->feeder);
	if (nb->fd < 0 || nb->send_failed)
		return false;
	deliver(nb, data, len, NULL);
	return !nb->send_failed;
}

uint32_t netbuf_queue_len(const struct netbuf *nb)
{
	struct outq *q = nb_out(nb);
	return q ? q->end - q->start : 0;
}

void netbuf_unread(struct netbuf *nb, const void *data, uint32_t len)
{
	struct netbuf_io *io = nb_io(nb);
	if (!io->in)
		io->in = iobuf_get();
	netbuf_flush_forwarded(nb);	/* now start == pos */
	struct iobuf *in = io->in;
	uint32_t rest = in->end - in->pos;
	if (in->pos < len) {
		struct iobuf *to = in;
		if (rest + len > in->size) {
			to = xmalloc(sizeof(*to) + rest + len);
			to->size = rest + len;
			to->pooled = false;
			to->next_free = NULL;
			nbg.used_count++;
		}
		memmove(to->data + len, in->data + in->pos, rest);
		if (to != in) {
			iobuf_put(in);
			io->in = to;
		}
		in = to;
		in->pos = len;
		in->end = rest + len;
	}
	in->pos -= len;
	in->start = in->pos;
	memcpy(in->data + in->pos, data, len);
}

uint32_t netbuf_buffered(const struct netbuf *nb)
{
	struct iobuf *in = nb_in(nb);
	return in ? in->end - in->pos : 0;
}

/* nb's queue drained (or nb is going away): its paused source may read again. */
static void unblock_source(struct netbuf *nb)
{
	struct netbuf *src = nb_blocked_src(nb);
	if (!src)
		return;
	nb->io->blocked_src = NULL;
	io_trim(nb);
	src->blocked = false;
	src->read_fired_paused = false;
	sync_events(src);
	runq_add(src, RUN_PROCESS | (tls_pending(src) ? RUN_READ : 0));
}

void netbuf_set_dst(struct netbuf *nb, struct netbuf *dst)
{
	netbuf_flush_forwarded(nb);
	if (nb->dst)
		drop_feeder(nb->dst, nb);
	if (nb->dst && nb_blocked_src(nb->dst) == nb)
		unblock_source(nb->dst);
	nb->dst = dst;
}

/* Returns false if the handler closed the owner. */
static bool write_queue(struct netbuf *nb)
{
	struct outq *q = nb_out(nb);
	if (!q)
		return true;
	while (q->end > q->start) {
		if (nb->tls_handshaking)
			break;
		ssize_t n = nb_write(nb, q->data + q->start, q->end - q->start);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			nb->send_failed = true;
			nb->last_errno = (int16_t)errno;
			return notify(nb, NETBUF_EV_SEND_FAILED, NULL);
		}
		q->start += (uint32_t)n;
	}
	if (q->end == q->start) {
		free(q);
		nb->io->out = NULL;
		unblock_source(nb);
		io_trim(nb);
		sync_events(nb);
		if (nb->want_drained)
			return notify(nb, NETBUF_EV_DRAINED, NULL);
		return true;
	}
	if (nb_blocked_src(nb) && q->end - q->start <= nbg.queue_limit / 2)
		unblock_source(nb);
	sync_events(nb);
	return true;
}

/* ---------------------------------------------------------------- input */

/*
 * Both act on the message at the parse position: what of it is already
 * buffered is taken now (so a handler may release or relink right after),
 * the rest as it arrives.
 */
void netbuf_forward(struct netbuf *nb, uint32_t len)
{
	struct iobuf *in = nb->io->in;
	uint32_t take = MIN(in->end - in->pos, len);

	nb->decided = true;
	if (nb->dst) {
		in->pos += take;
		set_feeder(nb->dst, nb);
	} else {
		netbuf_flush_forwarded(nb);
		in->pos += take;
		in->start = in->pos;
	}
	nb->pkt_remaining = len - take;
	nb->pkt_forward = true;
}

void netbuf_replace(struct netbuf *nb, uint32_t len, uint32_t cut, const void *data, uint32_t dlen)
{
	struct iobuf *in = nb_in(nb);

	if (!nb->dst || !in || cut > in->end - in->pos || cut > len) {
		/* No one to send to (or a caller's mistake): as netbuf_forward, which drops it. */
		netbuf_forward(nb, len);
		return;
	}
	rewrites_add(nb, cut, data, dlen);
	uint32_t take = MIN(in->end - in->pos, len - cut);
	in->pos += take;
	nb->decided = true;
	nb->pkt_remaining = len - cut - take;
	nb->pkt_forward = true;
}

void netbuf_insert(struct netbuf *nb, const void *data, uint32_t dlen)
{
	if (!nb->dst || dlen == 0)
		return;
	struct iobuf *in = nb_in(nb);
	if (rewrites.owner != nb && !in) {
		netbuf_send(nb->dst, data, dlen);	/* no buffer of nb's to join */
		return;
	}
	/* joined with what nb forwards next, in one send (a read's first answer held back, then let go) */
	rewrites_add(nb, 0, data, dlen);
}

void netbuf_skip(struct netbuf *nb, uint32_t len)
{
	struct iobuf *in = nb->io->in;
	uint32_t take = MIN(in->end - in->pos, len);

	nb->decided = true;
	netbuf_flush_forwarded(nb);
	in->pos += take;
	in->start = in->pos;
	nb->pkt_remaining = len - take;
	nb->pkt_forward = false;
}

void netbuf_pause(struct netbuf *nb)
{
	if (nb->paused)
		return;
	nb->paused = true;
	sync_events(nb);
}

void netbuf_resume(struct netbuf *nb)
{
	if (!nb->paused || nb->fd < 0)
		return;
	nb->paused = false;
	nb->read_fired_paused = false;
	sync_events(nb);
	if (nb_in(nb) && nb->io->in->end > nb->io->in->pos)
		runq_add(nb, RUN_PROCESS);
	if (tls_pending(nb))
		runq_add(nb, RUN_READ);
}

/* Makes room so that `need` bytes starting at pos fit; first sends what is forwarded. */
static void make_room(struct netbuf *nb, uint32_t need)
{
	netbuf_flush_forwarded(nb);	/* now start == pos */
	struct iobuf *in = nb->io->in;
	if (in->size - in->pos >= need)
		return;
	/* Offsets are taken before a new buffer replaces `in`: its fields are not set yet. */
	uint32_t used = in->end - in->start;
	uint32_t decided = in->pos - in->start;
	if (need <= in->size) {
		memmove(in->data, in->data + in->start, used);
	} else {
		struct iobuf *big = xmalloc(sizeof(*big) + need);
		big->size = need;
		big->pooled = false;
		big->next_free = NULL;
		memcpy(big->data, in->data + in->start, used);
		nbg.used_count++;
		iobuf_put(in);
		nb->io->in = in = big;
	}
	in->start = 0;
	in->pos = decided;
	in->end = used;
}

/*
 * Offers buffered messages to the handler until it pauses or the buffer
 * runs out. Returns false if the owner was closed by its handler.
 */
static bool process_input(struct netbuf *nb)
{
	while (!nb->paused && !nb->blocked && nb_in(nb)) {
		struct iobuf *in = nb->io->in;
		uint32_t avail = in->end - in->pos;

		if (nb->pkt_remaining) {
			if (!avail)
				break;
			uint32_t take = MIN(avail, nb->pkt_remaining);
			if (nb->pkt_forward && nb->dst) {
				in->pos += take;
				set_feeder(nb->dst, nb);
			} else {
				netbuf_flush_forwarded(nb);
				in->pos += take;
				in->start = in->pos;
			}
			nb->pkt_remaining -= take;
			continue;
		}

		struct pkt pkt;
		if (nb->expect_byte) {
			/* The one-byte answer to SSLRequest: no header, no length. */
			if (!avail)
				break;
			nb->expect_byte = false;
			pkt = (struct pkt){ .type = in->data[in->pos], .len = 1, .data = in->data + in->pos, .avail = 1 };
			nb->decided = false;
			if (!notify(nb, NETBUF_EV_PACKET, &pkt))
				return false;
			if (!nb->decided)
				netbuf_skip(nb, 1);
			continue;
		}
		enum proto_header_result res = proto_parse_header(in->data + in->pos, avail, nb->startup,
								  nbg.limits[nb->limit], &pkt);
		if (res == PROTO_HDR_NEED_MORE)
			break;
		if (res == PROTO_HDR_INVALID) {
			netbuf_flush_forwarded(nb);
			nb->paused = true;
			sync_events(nb);
			return notify(nb, NETBUF_EV_BAD_PACKET, NULL);
		}
		nb->decided = false;
		if (!notify(nb, NETBUF_EV_PACKET, &pkt))
			return false;
		if (nb->decided || nb->paused || nb->blocked)
			continue;
		if (pkt_complete(&pkt)) {
			/* A handler must decide on a whole message; dropping it keeps the stream framed. */
			log_error("internal: message '%c' left undecided, skipped", pkt.type ? pkt.type : '0');
			netbuf_skip(nb, pkt.len);
			continue;
		}
		make_room(nb, pkt.len);
		break;
	}
	netbuf_flush_forwarded(nb);
	return true;
}

static void release_input_if_empty(struct netbuf *nb)
{
	struct iobuf *in = nb_in(nb);
	if (in && in->start == in->end) {
		iobuf_put(in);
		nb->io->in = NULL;
		io_trim(nb);
	}
}

/* Returns false if the owner was closed. */
static bool read_input(struct netbuf *nb)
{
	struct netbuf_io *io = nb_io(nb);
	if (!io->in)
		io->in = iobuf_get();
	struct iobuf *in = io->in;
	if (in->end == in->size) {
		/* Drop the consumed head, or grow if the whole buffer is one message in progress. */
		make_room(nb, in->end - in->pos + (in->start == 0 ? nbg.buf_size : 1));
		in = nb->io->in;
	}
	if (nb->detect_tls) {
		/* A ClientHello (record type 22) instead of a startup packet: PostgreSQL 17's direct TLS. */
		uint8_t first;
		nb->detect_tls = false;
		if (recv(nb->fd, &first, 1, MSG_PEEK) == 1 && first == 0x16) {
			release_input_if_empty(nb);
			return notify(nb, NETBUF_EV_DIRECT_TLS, NULL);
		}
	}
	size_t room = in->size - in->end;
	ssize_t n = nb_read(nb, in->data + in->end, room);
	if (n > 0) {
		nb->read_more = (size_t)n == room;
		in->end += (uint32_t)n;
		if (!process_input(nb))
			return false;
		/* Decrypted bytes left inside OpenSSL raise no socket event: come back for them. */
		if (tls_pending(nb))
			runq_add(nb, RUN_READ);
	} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		if (n < 0)
			nb->last_errno = (int16_t)errno;
		release_input_if_empty(nb);
		netbuf_flush_forwarded(nb);
		nb->paused = true;
		sync_events(nb);
		return notify(nb, NETBUF_EV_RECV_FAILED, NULL);
	}
	release_input_if_empty(nb);
	return true;
}

/* Drives a non-blocking handshake; reports TLS_READY or TLS_FAILED to the owner. */
static void tls_handshake_step(struct netbuf *nb)
{
	nb->tls_hello = false;	/* its ClientHello came: the rest is a login under way */
	SSL *ssl = nb->io->ssl;
	ERR_clear_error();
	int r = SSL_do_handshake(ssl);
	if (r == 1) {
		if (SSL_is_server(ssl)) {	/* an accepted client: TLS 1.3 leaves OpenSSL here (tls_record.h) */
			char describe[64];
			tls_describe(ssl, describe, sizeof(describe));
			struct tls_record *rec = tls_record_adopt(ssl, describe, tls_alpn_postgresql(ssl));
			if (rec) {	/* OpenSSL's part is over */
				SSL_free(ssl);
				nb->io->ssl = NULL;
				nb->io->rec = rec;
			}
		}
		nb->tls_handshaking = false;
		nb->io->tls_want = 0;
		sync_events(nb);
		notify(nb, NETBUF_EV_TLS_READY, NULL);
		return;
	}
	int err = SSL_get_error(ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		nb->io->tls_want = err == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE;
		sync_events(nb);
		return;
	}
	unsigned long e = ERR_get_error();
	char reason[256] = "connection closed during the handshake";
	if (e)
		ERR_error_string_n(e, reason, sizeof(reason));
	else if (err == SSL_ERROR_SYSCALL && errno)
		snprintf(reason, sizeof(reason), "%s", strerror(errno));
	ERR_clear_error();
	long verify = SSL_get_verify_result(ssl);
	if (verify != X509_V_OK)
		snprintf(reason, sizeof(reason), "certificate verify failed: %s", X509_verify_cert_error_string(verify));
	/* Handed to the owner for its log line; lives until the next failure. */
	snprintf(nbg.tls_error, sizeof(nbg.tls_error), "%s", reason);
	nb->tls_handshaking = false;
	nb->io->tls_want = 0;
	nb->paused = true;
	sync_events(nb);
	notify(nb, NETBUF_EV_TLS_FAILED, NULL);
}

int netbuf_start_tls(struct netbuf *nb, SSL *ssl, bool accept)
{
	if (!ssl || netbuf_buffered(nb) || netbuf_queue_len(nb) || SSL_set_fd(ssl, nb->fd) != 1) {
		if (ssl)
			SSL_free(ssl);
		return -1;
	}
	release_input_if_empty(nb);
	nb_io(nb)->ssl = ssl;
	if (accept)
		SSL_set_accept_state(ssl);
	else
		SSL_set_connect_state(ssl);
	nb->tls_handshaking = true;
	if (accept && nb->limit <= NETBUF_LIMIT_AUTH) {
		/*
		 * A client's first step waits for its event, even a direct TLS
		 * one whose ClientHello is already here: that step is most of a
		 * login's work, and the login gate decides when it runs.
		 */
		nb->tls_hello = true;
		nb->io->tls_want = EV_READ;
		sync_events(nb);
		return 0;
	}
	tls_handshake_step(nb);
	return 0;
}

void netbuf_read_now(struct netbuf *nb)
{
	if (nb->fd >= 0 && !nb->paused && !nb->blocked)
		read_input(nb);
}

static inline __attribute__((always_inline)) void netbuf_event_run(struct netbuf *nb, short what);

/* A login's event the login gate holds back: off the loop, parked until its turn. */
static void gate_park(struct netbuf *nb, short what, enum login_gate_queue q)
{
	if (nb->ev_registered)
		event_del(&nb->ev);
	nb->ev_registered = 0;
	nb->gated = true;
	nb_io(nb)->gate = login_gate_park(nb, what, q);
}

/* Its turn (login_gate.h): its event back on the loop, and the one it had, replayed. */
static void gate_run(void *owner, short what)
{
	struct netbuf *nb = owner;
	nb->io->gate = NULL;
	nb->gated = false;
	io_trim(nb);
	sync_events(nb);
	netbuf_event_run(nb, what);
}

/* A socket's event: its handlers see one clock reading (common.h: clock_cache_begin). */
static void netbuf_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct netbuf *nb = arg;
	(void)fd;
	clock_cache_begin();
	enum login_gate_queue q = nb->tls_hello ? LOGIN_GATE_NEW : LOGIN_GATE_STARTED;
	if (nb->limit <= NETBUF_LIMIT_AUTH && !login_gate_admit(q))
		gate_park(nb, what, q);
	else
		netbuf_event_run(nb, what);
	clock_cache_end();
}

/* Inlined in both callers: a call here costs every event of established traffic its prologue. */
static inline __attribute__((always_inline)) void netbuf_event_run(struct netbuf *nb, short what)
{

	if (nb->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(nb->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		nb->connecting = false;
		nb->paused = true;	/* the owner decides when to read */
		sync_events(nb);
		if (err) {
			nb->last_errno = (int16_t)err;
			notify(nb, NETBUF_EV_CONNECT_FAILED, NULL);
		} else {
			notify(nb, NETBUF_EV_CONNECT_OK, NULL);
		}
		return;
	}
	if (nb->tls_handshaking) {
		tls_handshake_step(nb);
		return;
	}
	if ((what & EV_WRITE) && nb->tls_read_wants_write && !nb->paused && !nb->blocked) {
		nb->tls_read_wants_write = false;
		if (!read_input(nb))
			return;
		sync_events(nb);
	}
	if ((what & EV_READ) && nb->tls_write_wants_read) {
		nb->tls_write_wants_read = false;
		if (!write_queue(nb))
			return;
		if (nb->fd < 0)
			return;
	}
	if (what & EV_WRITE) {
		if (!write_queue(nb))
			return;
	}
	if ((what & EV_READ) && nb->fd >= 0) {
		if (!nb->paused && !nb->blocked) {
			/* Up to sbuf_loopcnt buffers while they come full, then others get a turn. */
			int rounds = nbg.loopcnt > 0 ? nbg.loopcnt : 1000;
			for (int i = 0; i < rounds; i++) {
				nb->read_more = false;
				if (!read_input(nb))
					return;
				if (!nb->read_more || nb->fd < 0 || nb->paused || nb->blocked)
					break;
			}
		} else {
			/* A waiting client that hung up must not keep its place (or have its query run). */
			char probe;
			ssize_t n = recv(nb->fd, &probe, 1, MSG_PEEK);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				if (n < 0)
					nb->last_errno = (int16_t)errno;
				notify(nb, NETBUF_EV_RECV_FAILED, NULL);
				return;
			}
			nb->read_fired_paused = true;	/* data, not EOF: now really stop listening */
			sync_events(nb);
		}
	}
}

static void run_queue_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	clock_cache_begin();
	/* Entries added while running are handled in this same pass. */
	for (uint32_t i = 0; i < nbg.runq_len; i++) {
		struct netbuf *nb = nbg.runq[i];
		if (!nb)
			continue;
		nbg.runq[i] = NULL;
		uint8_t flags = nb->run_flags;
		nb->run_flags = 0;
		if (nb->fd < 0)
			continue;
		if (flags & RUN_SEND_FAILED) {
			if (!notify(nb, NETBUF_EV_SEND_FAILED, NULL))
				continue;
			if (nb->fd < 0)
				continue;
		}
		if ((flags & RUN_PROCESS) && !nb->paused && !nb->blocked && nb_in(nb)) {
			if (!process_input(nb))
				continue;
			release_input_if_empty(nb);
		}
		if ((flags & RUN_READ) && nb->fd >= 0 && !nb->paused && !nb->blocked && nb_is_tls(nb))
			read_input(nb);
	}
	nbg.runq_len = 0;
	clock_cache_end();
}

void netbuf_close(struct netbuf *nb)
{
	if (nb->fd < 0 && !nb->io)
		return;
	runq_remove(nb);
	rewrites_drop(nb);
	struct netbuf *feeder = nb_feeder(nb);
	if (feeder) {
		/* The feeder's unsent bytes were meant for us; they go nowhere now. */
		struct iobuf *fin = nb_in(feeder);
		if (fin)
			fin->start = fin->pos;
		rewrites_drop(feeder);
		nb->io->feeder = NULL;
	}
	unblock_source(nb);
	if (nb->dst) {
		drop_feeder(nb->dst, nb);
		if (nb_blocked_src(nb->dst) == nb) {
			nb->dst->io->blocked_src = NULL;
			io_trim(nb->dst);
		}
		nb->dst = NULL;
	}
	SSL *ssl = netbuf_ssl(nb);
	bool tls = nb_is_tls(nb);
	if (nb->fd >= 0) {
		/* Best effort: a final error message queued for this peer. */
		struct outq *q = nb_out(nb);
		if (q && q->end > q->start && !nb->send_failed) {
			ssize_t n = tls ? (nb->tls_handshaking ? -1 : nb_write(nb, q->data + q->start, q->end - q->start)) :
				send(nb->fd, q->data + q->start, q->end - q->start, MSG_NOSIGNAL | MSG_DONTWAIT);
			(void)n;
		}
		if (nb->ev_registered)
			event_del(&nb->ev);
		nb->ev_registered = 0;
		if (ssl && !nb->tls_handshaking && !nb->send_failed)
			SSL_shutdown(ssl);	/* a close_notify, best effort, never waited for */
		else if (nb->io && nb->io->rec && !nb->send_failed)
			tls_record_close_notify(nb->io->rec, nb->fd);
		close(nb->fd);
		nb->fd = -1;
	}
	struct netbuf_io *io = nb->io;
	if (io) {
		if (io->gate)
			login_gate_unpark(io->gate);
		nb->gated = false;
		if (io->ssl)
			SSL_free(io->ssl);
		tls_record_free(io->rec);
		if (io->in)
			iobuf_put(io->in);
		free(io->out);
		memset(io, 0, sizeof(*io));
		io_trim(nb);
	}
	nb->tls_handshaking = false;
	nb->pkt_remaining = 0;
	nb->paused = true;
}
