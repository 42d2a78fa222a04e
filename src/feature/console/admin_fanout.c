/*
 * admin_fanout.c - with workers = N > 1, the console speaks for the whole
 * instance: a SHOW or a control command that arrives on the shared port
 * is run on every worker, and the replies are merged into one answer.
 *
 * How: the console's worker opens, from its own event loop, one console
 * connection (a "leg") to each running worker's private Unix socket
 * (workers.h), its own included, as user pgbouncer: the same OS user over
 * a Unix socket is the console superuser (auth.c), which no one else can
 * forge (SO_PEERCRED). A console on a private socket answers for its
 * worker alone (admin_fanout_wanted), so legs never fan out again, and an
 * operator or a test can still look at one worker. Each leg sends the
 * client's query text unchanged, collects RowDescription, DataRows,
 * CommandComplete, ErrorResponse and the first NoticeResponse, and closes
 * at ReadyForQuery. The asking client is not read meanwhile (its netbuf
 * is paused, as for PAUSE); if it leaves, the fan-out is closed at once
 * and nothing points to it; a CancelRequest ends a command that waits
 * (admin_fanout_cancel). The legs are left out of the rows and counts
 * the answer gives (struct own_legs), so the console says what /metrics
 * says. KILL_CLIENT goes to the one worker whose number is in the id's
 * high bits (workers.h).
 *
 * Why connections rather than shared memory: SHOW CLIENTS / SERVERS need
 * each worker's live objects, and KILL, RECONNECT, PAUSE db, WAIT_CLOSE
 * must run in the worker that owns the servers, inside its own loop; the
 * console code that does it already exists, so each worker runs exactly
 * the command it would run alone. Going through its own private socket
 * too keeps one path for every worker (a few system calls; SHOW is not a
 * hot path). workers = 1 never gets here (admin_fanout_wanted is false).
 *
 * Time bound: a worker that is not RUNNING in the worker table is skipped
 * with a NOTICE; a leg that has not logged in within FANOUT_TIMEOUT (2 s),
 * or, for a command that does not wait (every SHOW, RECONNECT, KILL, SET,
 * ...), has not answered by then, is dropped with a NOTICE and a log
 * line, and the answer is made from the others. PAUSE db and WAIT_CLOSE
 * wait on each worker as long as they need (as with one process); a
 * worker dying under them closes its leg, which ends its wait.
 *
 * Merging (admin_merge.c): CLIENTS, SERVERS, SOCKETS, ACTIVE_SOCKETS: the
 * rows of every worker, in worker order, with a last column "worker",
 * streamed: one worker's rows go to the client as they arrive while the
 * next workers' wait unread, paced by the client's unsent bytes, so the
 * answer for a million clients is never held whole (a worker whose turn
 * has not come, or whose rows are under way, is not cut by the bound).
 * POOLS, STATS*, DATABASES, USERS, MEM, HOSTS, LISTENERS: one row per key
 * (database / user / ...); counts and totals summed, averages of rates
 * summed, average times weighted by their count rate, maxwait the longest
 * (seconds and microseconds from the same worker), paused/disabled if any
 * worker is, settings from the lowest worker. LISTS and TOTALS: one row
 * per name, summed, but databases/users/pools/peers and DNS cache sizes
 * the largest (each worker has the same configuration). Control commands:
 * the tag (and notice) of the first worker that succeeded, each other
 * worker's error as a NOTICE "worker k: ..."; the first error when none
 * succeeded.
 *
 * Owns: the fan-outs under way and their legs. Touches a console client
 * only to pause, answer and resume it.
 */
#include "common.h"
#include "admin_internal.h"
#include "client.h"
#include "config.h"
#include "dns.h"
#include "instance.h"
#include "list.h"
#include "log.h"
#include "netbuf.h"
#include "proto.h"
#include "varcache.h"
#include "workers.h"

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define FANOUT_TIMEOUT (2 * USEC_PER_SEC)
#define LEG_MAX_PACKET (1024 * 1024)
/* A streamed answer waits while the asking client has this much unsent, until it is down to the low mark. */
#define STREAM_HIGH (1024 * 1024)
#define STREAM_LOW (256 * 1024)
#define STREAM_POLL_MS 5
#define ADMIN_MAX_COLUMNS 64	/* more than any SHOW has */

/* ---------------------------------------------------------------- legs */

enum leg_state { LEG_CONNECTING, LEG_LOGIN, LEG_QUERY, LEG_DONE, LEG_FAILED };

struct fanout;

struct leg {
	struct netbuf nb;
	struct fanout *fo;
	int worker;
	enum leg_state state;
	bool answering;			/* a streamed answer has begun to arrive (or waits for its turn) */
	struct admin_answer res;
	char failure[512];		/* why it gave no answer (LEG_FAILED) */
};

struct fanout {
	struct list_node node;		/* fanouts */
	struct client *client;
	const struct admin_view *view;	/* NULL: a control command */
	bool waits;			/* the command may wait on a worker: no answer deadline */
	bool starting;			/* legs still being set up: do not finish yet */
	/*
	 * Per-worker views (CLIENTS, SERVERS, SOCKETS, ACTIVE_SOCKETS) are
	 * streamed: worker `turn`'s rows go to the client as they arrive, the
	 * later workers' wait unread in their sockets, so a million clients'
	 * rows never sit in one process at once. The client's queue paces it.
	 */
	bool stream, header_sent;
	int turn, ncols;
	int col_type, col_user, col_app;	/* to leave out the fan-outs' own connections; -1: absent */
	struct event *drain_timer;
	char *query;
	char *undo;			/* what undoes the command if the client cancels it (PAUSE db: RESUME db) */
	struct event *timer;
	int nlegs, pending;
	struct leg *legs;		/* worker order; never moved (their netbufs are in the loop) */
};

static struct list fanouts = { .head = { &fanouts.head, &fanouts.head } };

static void fanout_check(struct fanout *fo);

static void leg_close(struct leg *leg, enum leg_state state)
{
	if (leg->state == LEG_DONE || leg->state == LEG_FAILED)
		return;
	netbuf_close(&leg->nb);
	leg->state = state;
	leg->fo->pending--;
}

static void leg_fail(struct leg *leg, const char *why)
{
	if (leg->state == LEG_DONE || leg->state == LEG_FAILED)
		return;
	snprintf(leg->failure, sizeof(leg->failure), "%s", why);
	log_warning("console: worker %d left out of \"%s\": %s", leg->worker, leg->fo->query, why);
	leg_close(leg, LEG_FAILED);
}

static void leg_send_startup(struct leg *leg)
{
	struct pktbuf b;
	pktbuf_init(&b, 128);
	pktbuf_begin(&b, 0);
	pktbuf_put_uint32(&b, PROTO_VERSION_3);
	pktbuf_put_string(&b, "user");
	pktbuf_put_string(&b, "pgbouncer");
	pktbuf_put_string(&b, "database");
	pktbuf_put_string(&b, "pgbouncer");
	pktbuf_put_string(&b, "application_name");
	pktbuf_put_string(&b, ADMIN_FANOUT_APPNAME);
	pktbuf_put_byte(&b, 0);
	pktbuf_end(&b);
	bool ok = netbuf_send(&leg->nb, b.buf, b.len);
	pktbuf_free(&b);
	if (!ok) {
		leg_fail(leg, "send failed");
		return;
	}
	leg->state = LEG_LOGIN;
	netbuf_resume(&leg->nb);
}

static void leg_send_query(struct leg *leg)
{
	struct pktbuf b;
	pktbuf_init(&b, 64 + (uint32_t)strlen(leg->fo->query));
	proto_put_query(&b, leg->fo->query);
	bool ok = netbuf_send(&leg->nb, b.buf, b.len);
	pktbuf_free(&b);
	if (!ok)
		leg_fail(leg, "send failed");
	else
		leg->state = LEG_QUERY;
}

/* ErrorResponse / NoticeResponse fields: the SQLSTATE, message and detail. */
static void read_fields(struct pkt_reader *r, char *state, size_t ssize, char *msg, size_t msize, char *detail,
			size_t dsize)
{
	for (;;) {
		uint8_t code = pkt_get_byte(r);
		if (code == 0 || r->failed)
			return;
		const char *v = pkt_get_string(r);
		if (!v)
			return;
		if (code == 'C' && state)
			snprintf(state, ssize, "%s", v);
		else if (code == 'M')
			snprintf(msg, msize, "%s", v);
		else if (code == 'D' && detail)
			snprintf(detail, dsize, "%s", v);
	}
}

static bool read_rowdesc(struct admin_answer *res, struct pkt_reader *r)
{
	int n = pkt_get_uint16(r);
	if (res->ncols || n <= 0)
		return false;
	res->names = xcalloc((size_t)n, sizeof(*res->names));
	res->oids = xcalloc((size_t)n, sizeof(*res->oids));
	res->ncols = n;
	for (int i = 0; i < n; i++) {
		const char *name = pkt_get_string(r);
		if (!name)
			return false;
		res->names[i] = xstrdup(name);
		pkt_get_uint32(r);
		pkt_get_uint16(r);
		res->oids[i] = pkt_get_uint32(r);
		pkt_get_uint16(r);
		pkt_get_uint32(r);
		pkt_get_uint16(r);
	}
	return !r->failed;
}

static bool read_datarow(struct admin_answer *res, struct pkt_reader *r)
{
	if (pkt_get_uint16(r) != res->ncols || res->ncols == 0)
		return false;
	char **row = xcalloc((size_t)res->ncols, sizeof(*row));
	if (res->nrows == res->cap) {
		res->cap = res->cap ? res->cap * 2 : 16;
		res->rows = xrealloc(res->rows, (size_t)res->cap * sizeof(*res->rows));
	}
	res->rows[res->nrows++] = row;
	for (int i = 0; i < res->ncols; i++) {
		uint32_t len = pkt_get_uint32(r);
		if (len == 0xFFFFFFFFu)
			continue;
		const uint8_t *p = pkt_get_bytes(r, len);
		if (!p)
			return false;
		row[i] = xmalloc(len + 1);
		memcpy(row[i], p, len);
		row[i][len] = '\0';
	}
	return !r->failed;
}

/* ---------------------------------------------------------------- streamed answers */

static int col_index(const struct admin_answer *res, const char *name)
{
	for (int i = 0; i < res->ncols; i++)
		if (strcmp(res->names[i], name) == 0)
			return i;
	return -1;
}

/* The first worker's columns and a last "worker" column, as admin_merge gives them. */
static void stream_header(struct fanout *fo, const struct admin_answer *ref)
{
	char types[ADMIN_MAX_COLUMNS + 2];
	const char **names = xcalloc((size_t)ref->ncols + 1, sizeof(*names));
	admin_merge_result_types(ref, types, true);	/* stream_rowdesc keeps ncols within ADMIN_MAX_COLUMNS */
	for (int i = 0; i < ref->ncols; i++)
		names[i] = ref->names[i];
	names[ref->ncols] = "worker";
	struct admin_result r;
	admin_result_init(&r, 1024);
	admin_result_begin(&r, types, names);
	netbuf_send(&fo->client->nb, r.b.buf, r.b.len);
	pktbuf_free(&r.b);
	free(names);
	fo->ncols = ref->ncols;
	fo->col_type = col_index(ref, "type");
	fo->col_user = col_index(ref, "user");
	fo->col_app = col_index(ref, "application_name");
	fo->header_sent = true;
}

static bool stream_rowdesc(struct fanout *fo, struct leg *leg, struct pkt_reader *r)
{
	if (!read_rowdesc(&leg->res, r))
		return false;
	if (leg->res.ncols > ADMIN_MAX_COLUMNS)
		return false;
	if (!fo->header_sent)
		stream_header(fo, &leg->res);
	return leg->res.ncols == fo->ncols;	/* another version's columns: that worker is left out */
}

/* Field i of a DataRow body: its bytes and length (-1: NULL); false if the row is short. */
static bool row_field(const uint8_t *body, uint32_t len, int i, const uint8_t **val, int32_t *vlen)
{
	uint32_t at = 2;
	for (int k = 0;; k++) {
		if (at + 4 > len)
			return false;
		uint32_t n = (uint32_t)body[at] << 24 | (uint32_t)body[at + 1] << 16 | (uint32_t)body[at + 2] << 8 | body[at + 3];
		at += 4;
		if (n != 0xFFFFFFFFu && n > len - at)
			return false;
		if (k == i) {
			*val = body + at;
			*vlen = n == 0xFFFFFFFFu ? -1 : (int32_t)n;
			return true;
		}
		if (n != 0xFFFFFFFFu)
			at += n;
	}
}

static bool field_is(const uint8_t *body, uint32_t len, int col, const char *want)
{
	const uint8_t *v;
	int32_t n;
	return col >= 0 && row_field(body, len, col, &v, &n) && n == (int32_t)strlen(want) && memcmp(v, want, (size_t)n) == 0;
}

static void stream_resume_check(evutil_socket_t fd, short what, void *arg);

/* One worker's row, with its worker number, to the client; the fan-outs' own connections left out. */
static bool stream_row(struct fanout *fo, struct leg *leg, const uint8_t *body, uint32_t len)
{
	if (len < 2 || ((uint32_t)body[0] << 8 | body[1]) != (uint32_t)fo->ncols)
		return false;
	const uint8_t *v;
	int32_t n;
	if (!row_field(body, len, fo->ncols - 1, &v, &n))
		return false;
	if (field_is(body, len, fo->col_type, "C") && field_is(body, len, fo->col_user, "pgbouncer") &&
	    field_is(body, len, fo->col_app, ADMIN_FANOUT_APPNAME))
		return true;
	char worker[16];
	int wlen = snprintf(worker, sizeof(worker), "%d", leg->worker);
	struct pktbuf b;
	pktbuf_init(&b, len + 32);
	pktbuf_begin(&b, 'D');
	pktbuf_put_uint16(&b, (uint16_t)(fo->ncols + 1));
	pktbuf_put_bytes(&b, body + 2, len - 2);
	pktbuf_put_uint32(&b, (uint32_t)wlen);
	pktbuf_put_bytes(&b, worker, (uint32_t)wlen);
	pktbuf_end(&b);
	netbuf_send(&fo->client->nb, b.buf, b.len);
	pktbuf_free(&b);
	if (netbuf_queue_len(&fo->client->nb) > STREAM_HIGH) {
		netbuf_pause(&leg->nb);	/* the client reads slower than the workers answer */
		if (!fo->drain_timer)
			fo->drain_timer = evtimer_new(pgv.base, stream_resume_check, fo);
		struct timeval tv = { 0, STREAM_POLL_MS * 1000 };
		evtimer_add(fo->drain_timer, &tv);
	}
	return true;
}

/* The worker whose turn it is reads again once the client has taken most of what it was sent. */
static void stream_resume_check(evutil_socket_t fd, short what, void *arg)
{
	struct fanout *fo = arg;
	(void)fd;
	(void)what;
	if (fo->turn >= fo->nlegs)
		return;
	if (netbuf_queue_len(&fo->client->nb) > STREAM_LOW) {
		struct timeval tv = { 0, STREAM_POLL_MS * 1000 };
		evtimer_add(fo->drain_timer, &tv);
		return;
	}
	netbuf_resume(&fo->legs[fo->turn].nb);
}

/* Whether leg may be read now: a streamed answer's rows are taken one worker after the other. */
static bool stream_my_turn(struct fanout *fo, struct leg *leg)
{
	if (!fo->stream || leg->state != LEG_QUERY)
		return true;
	leg->answering = true;
	if (leg == &fo->legs[fo->turn])
		return true;
	netbuf_pause(&leg->nb);	/* its packet stays in its buffer until its turn */
	return false;
}

/* Past the workers that are done, to the next, which is read from where it stopped. */
static void stream_advance(struct fanout *fo)
{
	while (fo->turn < fo->nlegs &&
	       (fo->legs[fo->turn].state == LEG_DONE || fo->legs[fo->turn].state == LEG_FAILED))
		fo->turn++;
	if (fo->turn < fo->nlegs && fo->legs[fo->turn].state == LEG_QUERY &&
	    (!fo->drain_timer || !evtimer_pending(fo->drain_timer, NULL)))
		netbuf_resume(&fo->legs[fo->turn].nb);
}

/* One whole message from the worker; false if it makes no sense (the leg is dropped). */
static bool leg_message(struct leg *leg, uint8_t type, struct pkt_reader *r)
{
	struct admin_answer *res = &leg->res;
	switch (type) {
	case 'R':
		return pkt_get_uint32(r) == 0;	/* anything but AuthenticationOk: not the console superuser */
	case 'E':
		res->has_error = true;
		read_fields(r, res->sqlstate, sizeof(res->sqlstate), res->message, sizeof(res->message), NULL, 0);
		return leg->state == LEG_QUERY;
	case 'N':
		if (leg->state == LEG_QUERY && !res->has_notice) {
			res->has_notice = true;
			read_fields(r, NULL, 0, res->notice, sizeof(res->notice), res->notice_detail,
				    sizeof(res->notice_detail));
		}
		return true;
	case 'T':
		if (leg->fo->stream)
			return leg->state == LEG_QUERY && stream_rowdesc(leg->fo, leg, r);
		return leg->state == LEG_QUERY && read_rowdesc(res, r);
	case 'D':
		if (leg->fo->stream)
			return leg->state == LEG_QUERY && stream_row(leg->fo, leg, r->data, r->len);
		return leg->state == LEG_QUERY && read_datarow(res, r);
	case 'C': {
		const char *tag = pkt_get_string(r);
		snprintf(res->tag, sizeof(res->tag), "%s", tag ? tag : "");
		return tag != NULL;
	}
	case 'Z':
		if (leg->state == LEG_LOGIN)
			leg_send_query(leg);
		else
			leg_close(leg, LEG_DONE);
		return true;
	default:
		return true;	/* ParameterStatus, BackendKeyData, ... */
	}
}

static bool leg_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	struct leg *leg = container_of(nb, struct leg, nb);
	struct fanout *fo = leg->fo;
	char why[512];

	switch (ev) {
	case NETBUF_EV_CONNECT_OK:
		leg_send_startup(leg);
		break;
	case NETBUF_EV_PACKET: {
		if (!pkt_complete(pkt))
			return true;
		if (!stream_my_turn(fo, leg))
			return true;
		struct pkt_reader r;
		pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
		uint8_t type = pkt->type;
		bool ok = leg_message(leg, type, &r);
		if (leg->state != LEG_DONE && leg->state != LEG_FAILED)
			netbuf_skip(nb, pkt->len);
		if (!ok) {
			snprintf(why, sizeof(why), "unexpected reply '%c'%s%s", type,
				 leg->res.message[0] ? ": " : "", leg->res.message);
			leg_fail(leg, why);
		}
		break;
	}
	case NETBUF_EV_CONNECT_FAILED:
		snprintf(why, sizeof(why), "could not connect: %s", strerror(nb->last_errno));
		leg_fail(leg, why);
		break;
	case NETBUF_EV_RECV_FAILED:
		leg_fail(leg, "the worker closed the connection");
		break;
	case NETBUF_EV_SEND_FAILED:
		leg_fail(leg, "send failed");
		break;
	case NETBUF_EV_BAD_PACKET:
		leg_fail(leg, "bad packet");
		break;
	case NETBUF_EV_DRAINED:
	case NETBUF_EV_TLS_READY:
	case NETBUF_EV_TLS_FAILED:
	case NETBUF_EV_DIRECT_TLS:
		break;
	}
	if (leg->state != LEG_DONE && leg->state != LEG_FAILED)
		return true;
	fanout_check(fo);	/* may free the fan-out and this leg: its netbuf is closed already */
	return false;
}

static void leg_start(struct leg *leg)
{
	struct worker_status w;
	char dir[256], why[300];
	union pgv_sockaddr addr;
	socklen_t len = 0;

	workers_read(leg->worker, &w);
	if (w.pid <= 0 || w.state != WORKER_STATE_RUNNING) {
		snprintf(why, sizeof(why), "it is %s", worker_state_name(w.state));
		leg_fail(leg, why);
		return;
	}
	workers_socket_dir(pgv.cfg, leg->worker, dir, sizeof(dir));
	if (dns_literal_address(dir, pgv.cfg->listen_port, &addr, &len, why, sizeof(why)) != 1) {
		leg_fail(leg, why);
		return;
	}
	if (netbuf_connect(&leg->nb, &addr.sa, len) < 0) {
		snprintf(why, sizeof(why), "could not connect: %s", strerror(errno));
		leg_fail(leg, why);
	}
}

/* ---------------------------------------------------------------- fan-outs */

static void fanout_free(struct fanout *fo)
{
	for (int i = 0; i < fo->nlegs; i++) {
		netbuf_close(&fo->legs[i].nb);
		admin_answer_free(&fo->legs[i].res);
	}
	if (fo->timer)
		event_free(fo->timer);
	if (fo->drain_timer)
		event_free(fo->drain_timer);
	free(fo->legs);
	free(fo->query);
	free(fo->undo);
	free(fo);
}

static void fanout_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct fanout *fo = arg;
	char why[64];
	(void)fd; (void)what;
	snprintf(why, sizeof(why), "no answer within %d ms", (int)(FANOUT_TIMEOUT / 1000));
	fo->starting = true;	/* finish once, after the loop */
	for (int i = 0; i < fo->nlegs; i++) {
		struct leg *leg = &fo->legs[i];
		if (leg->state == LEG_CONNECTING || leg->state == LEG_LOGIN ||
		    (leg->state == LEG_QUERY && !fo->waits && !leg->answering))
			leg_fail(leg, why);	/* a streamed answer under way (or waiting its turn) is not cut */
	}
	fo->starting = false;
	fanout_check(fo);
}

/* client NULL: a command nobody waits for (a cancelled PAUSE's undoing), whose outcome is only logged. */
static void fanout_begin(struct client *client, const char *query, const struct admin_view *view, bool waits,
			 int only_worker)
{
	struct fanout *fo = xcalloc(1, sizeof(*fo));
	fo->client = client;
	fo->view = view;
	fo->waits = waits;
	fo->stream = view && admin_merge_per_worker(view);
	fo->query = xstrdup(query);
	fo->nlegs = only_worker ? 1 : workers_count();
	fo->legs = xcalloc((size_t)fo->nlegs, sizeof(*fo->legs));
	fo->starting = true;
	list_node_init(&fo->node);
	list_append(&fanouts, &fo->node);
	if (client)
		netbuf_pause(&client->nb);
	for (int i = 0; i < fo->nlegs; i++) {
		struct leg *leg = &fo->legs[i];
		leg->fo = fo;
		leg->worker = only_worker ? only_worker : i + 1;
		leg->state = LEG_CONNECTING;
		netbuf_init(&leg->nb, leg_handler, LEG_MAX_PACKET);
		fo->pending++;
		leg_start(leg);
	}
	fo->timer = evtimer_new(pgv.base, fanout_timeout, fo);
	struct timeval tv = { FANOUT_TIMEOUT / USEC_PER_SEC, FANOUT_TIMEOUT % USEC_PER_SEC };
	evtimer_add(fo->timer, &tv);
	fo->starting = false;
	fanout_check(fo);
}

static struct fanout *fanout_of(const struct client *client)
{
	list_for_each(pos, &fanouts) {
		struct fanout *fo = container_of(pos, struct fanout, node);
		if (fo->client == client)
			return fo;
	}
	return NULL;
}

bool admin_fanout_abort(struct client *client)
{
	struct fanout *fo = fanout_of(client);
	if (!fo)
		return false;
	list_remove(&fanouts, &fo->node);
	fanout_free(fo);
	return true;
}

bool admin_fanout_cancel(struct client *client)
{
	struct fanout *fo = fanout_of(client);
	if (!fo)
		return false;
	if (!fo->waits)
		return true;	/* answered within FANOUT_TIMEOUT anyway */
	char *undo = fo->undo;
	fo->undo = NULL;
	log_info("console: \"%s\" canceled%s%s", fo->query, undo ? ", running on every worker: " : "",
		 undo ? undo : "");
	list_remove(&fanouts, &fo->node);
	fanout_free(fo);	/* each worker's wait ends with its connection */
	admin_reply_error(client, "57014", "canceling statement due to user request");
	netbuf_resume(&client->nb);
	if (undo)
		fanout_begin(NULL, undo, NULL, false, 0);	/* nobody waits for it: logged */
	free(undo);
	return true;
}

/* A NOTICE for each worker left out, and (control commands) each error beside a success. */
static void send_leg_notices(struct fanout *fo, bool errors_too)
{
	char msg[600];
	for (int i = 0; i < fo->nlegs; i++) {
		const struct leg *leg = &fo->legs[i];
		if (leg->state == LEG_FAILED)
			snprintf(msg, sizeof(msg), "worker %d did not answer: %s", leg->worker, leg->failure);
		else if (errors_too && leg->res.has_error)
			snprintf(msg, sizeof(msg), "worker %d: %s", leg->worker, leg->res.message);
		else
			continue;
		admin_send_notice(fo->client, msg, NULL);
	}
}

static void reply_control(struct fanout *fo)
{
	const struct leg *ok = NULL, *err = NULL;
	for (int i = 0; i < fo->nlegs; i++) {
		const struct leg *leg = &fo->legs[i];
		if (leg->state != LEG_DONE)
			continue;
		if (!leg->res.has_error && !ok)
			ok = leg;
		if (leg->res.has_error && !err)
			err = leg;
	}
	send_leg_notices(fo, ok != NULL);
	if (ok && ok->res.has_notice)
		admin_reply_notice(fo->client, ok->res.notice, ok->res.notice_detail[0] ? ok->res.notice_detail : NULL,
				   ok->res.tag);
	else if (ok)
		admin_reply_complete(fo->client, ok->res.tag);
	else if (err)
		admin_reply_error(fo->client, err->res.sqlstate[0] ? err->res.sqlstate : "08P01", err->res.message);
	else
		admin_reply_errorf(fo->client, "no worker answered: %s", fo->legs[0].failure);
}

static void reply_show(struct fanout *fo);

/* A command nobody waits for: what each worker said goes to the log. */
static void log_fanout_outcome(const struct fanout *fo)
{
	for (int i = 0; i < fo->nlegs; i++) {
		const struct leg *leg = &fo->legs[i];
		if (leg->state == LEG_DONE)
			log_info("console: worker %d: %s: %s", leg->worker, fo->query,
				 leg->res.has_error ? leg->res.message : leg->res.tag);
	}
}

static void stream_finish(struct fanout *fo);

static void fanout_check(struct fanout *fo)
{
	if (fo->stream && !fo->starting)
		stream_advance(fo);
	if (fo->starting || fo->pending > 0)
		return;
	list_remove(&fanouts, &fo->node);
	struct client *client = fo->client;
	if (!client)
		log_fanout_outcome(fo);
	else if (fo->stream)
		stream_finish(fo);
	else if (fo->view)
		reply_show(fo);
	else
		reply_control(fo);
	fanout_free(fo);
	if (client)
		netbuf_resume(&client->nb);
}

/* A SHOW: the answers of the workers that gave one, merged (admin_merge.c). */
static void reply_show(struct fanout *fo)
{
	struct admin_answer **answers = xcalloc((size_t)fo->nlegs, sizeof(*answers));
	const struct leg *err = NULL;
	int n = 0;
	send_leg_notices(fo, false);
	for (int i = 0; i < fo->nlegs; i++) {
		struct leg *leg = &fo->legs[i];
		if (leg->state == LEG_DONE && leg->res.has_error && !err)
			err = leg;
		if (leg->state != LEG_DONE || leg->res.has_error || leg->res.ncols == 0)
			continue;
		leg->res.worker = leg->worker;
		answers[n++] = &leg->res;
	}
	if (n > 0) {
		struct admin_result r;
		admin_result_init(&r, 4096);
		admin_merge(fo->view, answers, n, n, &r);	/* each answering worker has one leg: ours */
		admin_result_send(fo->client, &r);
	} else if (err) {
		admin_reply_errorf(fo->client, "%s", err->res.message);
	} else {
		admin_reply_errorf(fo->client, "no worker answered: %s", fo->legs[0].failure);
	}
	free(answers);
}

/* A streamed answer's end: the workers left out, and the tag; or the error if no rows came at all. */
static void stream_finish(struct fanout *fo)
{
	send_leg_notices(fo, fo->header_sent);	/* with rows sent, a worker's error can only be a notice */
	if (fo->header_sent) {
		struct pktbuf b;
		pktbuf_init(&b, 64);
		pktbuf_begin(&b, 'C');
		pktbuf_put_string(&b, "SHOW");
		pktbuf_end(&b);
		proto_put_ready(&b, 'I');
		netbuf_send(&fo->client->nb, b.buf, b.len);
		pktbuf_free(&b);
		return;
	}
	for (int i = 0; i < fo->nlegs; i++)
		if (fo->legs[i].state == LEG_DONE && fo->legs[i].res.has_error) {
			admin_reply_errorf(fo->client, "%s", fo->legs[i].res.message);
			return;
		}
	admin_reply_errorf(fo->client, "no worker answered: %s", fo->legs[0].failure);
}

/* ---------------------------------------------------------------- entry points */

/* Whether the client came in on this worker's private socket (a console there speaks for its worker). */
static bool on_private_socket(const struct client *client)
{
	struct sockaddr_un local;
	socklen_t len = sizeof(local);
	union pgv_sockaddr mine;
	socklen_t mine_len = 0;
	char dir[256], err[128];
	if (!client->is_unix || getsockname(client->nb.fd, (struct sockaddr *)&local, &len) < 0)
		return false;
	workers_socket_dir(pgv.cfg, workers_self(), dir, sizeof(dir));
	if (dns_literal_address(dir, pgv.cfg->listen_port, &mine, &mine_len, err, sizeof(err)) != 1)
		return false;
	if (len <= offsetof(struct sockaddr_un, sun_path) || local.sun_family != AF_UNIX)
		return false;
	if (mine.un.sun_path[0] == '\0')	/* abstract: the name's exact bytes */
		return len == mine_len && memcmp(&local, &mine.un, len) == 0;
	return strncmp(local.sun_path, mine.un.sun_path, sizeof(local.sun_path)) == 0;
}

bool admin_fanout_is_leg(const struct client *client)
{
	if (workers_count() <= 1 || !client->admin_superuser || !on_private_socket(client))
		return false;
	const char *app = varcache_get(client->vars, varcache_index("application_name"));
	return app && strcmp(app, ADMIN_FANOUT_APPNAME) == 0;
}

bool admin_fanout_wanted(const struct client *client)
{
	return workers_count() > 1 && !on_private_socket(client);
}

bool admin_fanout_show(struct client *client, const char *what, const char *query)
{
	const struct admin_view *view = admin_merge_find(what);
	if (view)
		fanout_begin(client, query, view, false, 0);
	return view != NULL;
}

void admin_fanout_control(struct client *client, const char *query, int worker, bool waits, const char *undo)
{
	fanout_begin(client, query, NULL, waits, worker);
	struct fanout *fo = fanout_of(client);	/* NULL if it has answered already */
	if (fo && undo)
		fo->undo = xstrdup(undo);
}
