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
 * Merging (views[] below): CLIENTS, SERVERS, SOCKETS, ACTIVE_SOCKETS: the
 * rows of every worker, in worker order, with a last column "worker".
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
#include "pgvalve/common.h"
#include "pgvalve/admin_internal.h"
#include "pgvalve/client.h"
#include "pgvalve/config.h"
#include "pgvalve/dns.h"
#include "pgvalve/instance.h"
#include "pgvalve/list.h"
#include "pgvalve/log.h"
#include "pgvalve/netbuf.h"
#include "pgvalve/proto.h"
#include "pgvalve/varcache.h"
#include "pgvalve/workers.h"

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define FANOUT_TIMEOUT (2 * USEC_PER_SEC)
#define LEG_MAX_PACKET (1024 * 1024)
#define FANOUT_APPNAME "pgvalve-fanout"

/* ---------------------------------------------------------------- merge rules */

enum col_rule {
	COL_FIRST,		/* the lowest worker's */
	COL_KEY,		/* rows with equal keys are merged */
	COL_SUM,
	COL_MAX,
	COL_WAVG,		/* weighted by the column (row) named weight; the largest if all weights are 0 */
	COL_MAXWAIT,		/* maxwait / maxwait_us: both from the worker with the longest wait */
};

struct col_def {
	const char *name;
	enum col_rule rule;
	const char *weight;
};

enum view_shape {
	VIEW_PER_WORKER,	/* every worker's rows, and a worker column */
	VIEW_KEYED,		/* one row per key */
	VIEW_NAME_VALUE,	/* (name, value) rows: the rules are per name */
};

/*
 * The fan-out's own connections, one per worker that answered, are
 * console clients of user pgbouncer there while the command runs: the
 * row whose first column is key (and second key2, unless NULL) counts
 * them in column col; they are taken out, so the numbers are what they
 * would be without the fan-out (and what /metrics says).
 */
struct own_legs {
	const char *key, *key2, *col;
};

struct view_def {
	const char *name;
	enum view_shape shape;
	bool sorted;		/* keyed rows in the byte order of their keys, else in order of appearance */
	enum col_rule dflt;	/* for columns (rows, NAME_VALUE) not listed */
	const struct col_def *cols;
	struct own_legs legs;	/* key NULL: the view does not count them */
};

static const struct col_def pools_cols[] = {
	{ "database", COL_KEY, NULL }, { "user", COL_KEY, NULL }, { "maxwait", COL_MAXWAIT, NULL },
	{ "maxwait_us", COL_MAXWAIT, NULL }, { "pool_mode", COL_FIRST, NULL },
	{ "load_balance_hosts", COL_FIRST, NULL }, { NULL, 0, NULL },
};
static const struct col_def stats_cols[] = {
	{ "database", COL_KEY, NULL }, { "avg_xact_time", COL_WAVG, "avg_xact_count" },
	{ "avg_query_time", COL_WAVG, "avg_query_count" },
	{ "avg_wait_time", COL_WAVG, "avg_server_assignment_count" }, { NULL, 0, NULL },
};
static const struct col_def stats_totals_cols[] = { { "database", COL_KEY, NULL }, { NULL, 0, NULL } };
static const struct col_def stats_averages_cols[] = {
	{ "database", COL_KEY, NULL }, { "xact_time", COL_WAVG, "xact_count" },
	{ "query_time", COL_WAVG, "query_count" }, { "wait_time", COL_WAVG, "server_assignment_count" },
	{ NULL, 0, NULL },
};
static const struct col_def totals_rows[] = {
	{ "avg_xact_time", COL_WAVG, "avg_xact_count" }, { "avg_query_time", COL_WAVG, "avg_query_count" },
	{ "avg_wait_time", COL_WAVG, "avg_server_assignment_count" }, { NULL, 0, NULL },
};
static const struct col_def databases_cols[] = {
	{ "name", COL_KEY, NULL }, { "current_connections", COL_SUM, NULL },
	{ "current_client_connections", COL_SUM, NULL }, { "paused", COL_MAX, NULL },
	{ "disabled", COL_MAX, NULL }, { NULL, 0, NULL },
};
static const struct col_def users_cols[] = {
	{ "name", COL_KEY, NULL }, { "current_connections", COL_SUM, NULL },
	{ "current_client_connections", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def lists_rows[] = {
	{ "databases", COL_MAX, NULL }, { "users", COL_MAX, NULL }, { "peers", COL_MAX, NULL },
	{ "pools", COL_MAX, NULL }, { "peer_pools", COL_MAX, NULL }, { "dns_names", COL_MAX, NULL },
	{ "dns_zones", COL_MAX, NULL }, { NULL, 0, NULL },
};
static const struct col_def mem_cols[] = { { "name", COL_KEY, NULL }, { "size", COL_FIRST, NULL }, { NULL, 0, NULL } };
static const struct col_def hosts_cols[] = {
	{ "database", COL_KEY, NULL }, { "host", COL_KEY, NULL }, { "port", COL_KEY, NULL },
	{ "sv_count", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def listeners_cols[] = {
	{ "database", COL_KEY, NULL }, { "user", COL_KEY, NULL }, { "channel", COL_KEY, NULL },
	{ "listeners", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def no_cols[] = { { NULL, 0, NULL } };

#define NO_LEGS { NULL, NULL, NULL }

static const struct view_def views[] = {
	{ "POOLS", VIEW_KEYED, true, COL_SUM, pools_cols, { "pgbouncer", "pgbouncer", "cl_active" } },
	{ "STATS", VIEW_KEYED, true, COL_SUM, stats_cols, NO_LEGS },
	{ "STATS_TOTALS", VIEW_KEYED, true, COL_SUM, stats_totals_cols, NO_LEGS },
	{ "STATS_AVERAGES", VIEW_KEYED, true, COL_SUM, stats_averages_cols, NO_LEGS },
	{ "TOTALS", VIEW_NAME_VALUE, false, COL_SUM, totals_rows, NO_LEGS },
	{ "DATABASES", VIEW_KEYED, true, COL_FIRST, databases_cols,
	  { "pgbouncer", NULL, "current_client_connections" } },
	{ "USERS", VIEW_KEYED, true, COL_FIRST, users_cols, { "pgbouncer", NULL, "current_client_connections" } },
	{ "LISTS", VIEW_NAME_VALUE, false, COL_SUM, lists_rows, { "used_clients", NULL, "items" } },
	{ "MEM", VIEW_KEYED, false, COL_SUM, mem_cols, NO_LEGS },
	{ "HOSTS", VIEW_KEYED, false, COL_FIRST, hosts_cols, NO_LEGS },
	{ "LISTENERS", VIEW_KEYED, false, COL_FIRST, listeners_cols, NO_LEGS },
	{ "CLIENTS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "SERVERS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "SOCKETS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "ACTIVE_SOCKETS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
};

static const struct col_def *rule_of(const struct view_def *v, const char *name)
{
	static const struct col_def dflt[] = {
		{ NULL, COL_FIRST, NULL }, { NULL, COL_KEY, NULL }, { NULL, COL_SUM, NULL }, { NULL, COL_MAX, NULL },
	};
	for (const struct col_def *c = v->cols; c->name; c++)
		if (name && strcmp(c->name, name) == 0)
			return c;
	return &dflt[v->dflt];
}

/* ---------------------------------------------------------------- legs */

/* What one worker answered. */
struct leg_result {
	int ncols;
	char **names;
	uint32_t *oids;
	char ***rows;
	int nrows, cap;
	char tag[128];
	bool has_error, has_notice;
	char sqlstate[6];
	char message[400];
	char notice[400];
	char notice_detail[1024];
	char failure[512];	/* why it gave no answer (LEG_FAILED) */
};

enum leg_state { LEG_CONNECTING, LEG_LOGIN, LEG_QUERY, LEG_DONE, LEG_FAILED };

struct fanout;

struct leg {
	struct netbuf nb;
	struct fanout *fo;
	int worker;
	enum leg_state state;
	struct leg_result res;
};

struct fanout {
	struct list_node node;		/* fanouts */
	struct client *client;
	const struct view_def *view;	/* NULL: a control command */
	bool waits;			/* the command may wait on a worker: no answer deadline */
	bool starting;			/* legs still being set up: do not finish yet */
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
	snprintf(leg->res.failure, sizeof(leg->res.failure), "%s", why);
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
	pktbuf_put_string(&b, FANOUT_APPNAME);
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

static bool read_rowdesc(struct leg_result *res, struct pkt_reader *r)
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

static bool read_datarow(struct leg_result *res, struct pkt_reader *r)
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

/* One whole message from the worker; false if it makes no sense (the leg is dropped). */
static bool leg_message(struct leg *leg, uint8_t type, struct pkt_reader *r)
{
	struct leg_result *res = &leg->res;
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
		return leg->state == LEG_QUERY && read_rowdesc(res, r);
	case 'D':
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

static void result_free(struct leg_result *res)
{
	for (int i = 0; i < res->nrows; i++) {
		for (int j = 0; j < res->ncols; j++)
			free(res->rows[i][j]);
		free(res->rows[i]);
	}
	for (int j = 0; j < res->ncols; j++)
		free(res->names[j]);
	free(res->rows);
	free(res->names);
	free(res->oids);
}

/* ---------------------------------------------------------------- fan-outs */

static void fanout_free(struct fanout *fo)
{
	for (int i = 0; i < fo->nlegs; i++) {
		netbuf_close(&fo->legs[i].nb);
		result_free(&fo->legs[i].res);
	}
	if (fo->timer)
		event_free(fo->timer);
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
		if (leg->state == LEG_CONNECTING || leg->state == LEG_LOGIN || (leg->state == LEG_QUERY && !fo->waits))
			leg_fail(leg, why);
	}
	fo->starting = false;
	fanout_check(fo);
}

/* client NULL: a command nobody waits for (a cancelled PAUSE's undoing), whose outcome is only logged. */
static void fanout_begin(struct client *client, const char *query, const struct view_def *view, bool waits,
			 int only_worker)
{
	struct fanout *fo = xcalloc(1, sizeof(*fo));
	fo->client = client;
	fo->view = view;
	fo->waits = waits;
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
			snprintf(msg, sizeof(msg), "worker %d did not answer: %s", leg->worker, leg->res.failure);
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
		admin_reply_errorf(fo->client, "no worker answered: %s", fo->legs[0].res.failure);
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

static void fanout_check(struct fanout *fo)
{
	if (fo->starting || fo->pending > 0)
		return;
	list_remove(&fanouts, &fo->node);
	struct client *client = fo->client;
	if (!client)
		log_fanout_outcome(fo);
	else if (fo->view)
		reply_show(fo);
	else
		reply_control(fo);
	fanout_free(fo);
	if (client)
		netbuf_resume(&client->nb);
}

/* ---------------------------------------------------------------- merging SHOW replies */

/* One worker's row in a merged view. */
struct member {
	const struct leg_result *res;
	int leg, row;
};

struct merge {
	const struct view_def *view;
	const struct leg_result *ref;	/* the columns every answer must have */
	const struct col_def **rules;	/* per column (KEYED) */
	struct member *m;
	int nm;
	int legs;			/* the fan-out's own connections the answers count */
};

static const char *member_value(const struct member *m, int col)
{
	return m->res->rows[m->row][col];
}

static int find_col(const struct leg_result *res, const char *name)
{
	for (int i = 0; name && i < res->ncols; i++)
		if (strcmp(res->names[i], name) == 0)
			return i;
	return -1;
}

static int cmp_nullable(const char *a, const char *b)
{
	if (!a || !b)
		return a ? 1 : b ? -1 : 0;
	return strcmp(a, b);
}

static const struct merge *sort_merge;

static int cmp_key(const struct merge *mg, const struct member *a, const struct member *b)
{
	for (int c = 0; c < mg->ref->ncols; c++) {
		if (mg->rules[c]->rule != COL_KEY)
			continue;
		int r = cmp_nullable(member_value(a, c), member_value(b, c));
		if (r)
			return r;
	}
	return 0;
}

/* Rows by key, then worker and row order: equal keys end up together, the lowest worker first. */
static int cmp_member(const void *pa, const void *pb)
{
	const struct member *a = pa, *b = pb;
	int r = cmp_key(sort_merge, a, b);
	if (r)
		return r;
	return a->leg != b->leg ? a->leg - b->leg : a->row - b->row;
}

static int cmp_first_seen(const void *pa, const void *pb)
{
	const struct member *a = *(const struct member *const *)pa, *b = *(const struct member *const *)pb;
	return a->leg != b->leg ? a->leg - b->leg : a->row - b->row;
}

static long long num(const char *s)
{
	return s ? strtoll(s, NULL, 10) : 0;
}

/* The value of row `name`'s value column in a (name, value) answer. */
static const char *named_value(const struct leg_result *res, const char *name)
{
	for (int i = 0; name && i < res->nrows; i++)
		if (res->rows[i][0] && strcmp(res->rows[i][0], name) == 0)
			return res->rows[i][1];
	return NULL;
}

/* One merged cell of the group g[0..n) for column col under rule def into buf. */
static const char *merge_cell(const struct member *g, int n, int col, const struct col_def *def, bool by_name,
			      char *buf, size_t size)
{
	long long best = 0, sum = 0;
	long double wnum = 0, wden = 0;
	int best_i = 0, wcol = by_name ? 1 : find_col(g[0].res, def->weight);
	bool any = false;
	if (def->rule == COL_FIRST || def->rule == COL_KEY)
		return member_value(&g[0], col);
	int ws = by_name ? -1 : find_col(g[0].res, "maxwait"), wus = by_name ? -1 : find_col(g[0].res, "maxwait_us");
	for (int i = 0; i < n; i++) {
		const char *s = member_value(&g[i], col);
		long long v = num(s);
		if (def->rule == COL_MAXWAIT && ws >= 0 && wus >= 0)
			v = num(member_value(&g[i], ws)) * USEC_PER_SEC + num(member_value(&g[i], wus));
		if (s && (!any || v > best)) {
			best = v;
			best_i = i;
		}
		any = any || s;
		sum += v;
		if (def->rule == COL_WAVG && wcol >= 0) {
			long double w = (long double)num(by_name ? named_value(g[i].res, def->weight) :
								   member_value(&g[i], wcol));
			wnum += w * (long double)v;
			wden += w;
		}
	}
	if (!any)
		return NULL;
	if (def->rule == COL_MAXWAIT)
		return member_value(&g[best_i], col);
	long long out = def->rule == COL_SUM ? sum : def->rule == COL_WAVG && wden > 0 ? (long long)(wnum / wden) : best;
	snprintf(buf, size, "%lld", out);
	return buf;
}

/* RowDescription letters (admin_result) for the workers' column types. */
static void result_types(const struct leg_result *ref, char *types, bool worker_col)
{
	int i;
	for (i = 0; i < ref->ncols; i++)
		types[i] = ref->oids[i] == 20 ? 'q' : ref->oids[i] == 23 ? 'i' : ref->oids[i] == 1700 ? 'N' : 's';
	if (worker_col)
		types[i++] = 'i';
	types[i] = '\0';
}

/* A fan-out's own connection to a worker (the console superuser over a Unix socket, named so). */
static bool is_leg_row(const struct merge *mg, const struct member *m)
{
	int app = find_col(mg->ref, "application_name"), user = find_col(mg->ref, "user"),
	    type = find_col(mg->ref, "type");
	return app >= 0 && user >= 0 && type >= 0 && member_value(m, type) && member_value(m, app) &&
	       member_value(m, user) && strcmp(member_value(m, type), "C") == 0 &&
	       strcmp(member_value(m, app), FANOUT_APPNAME) == 0 && strcmp(member_value(m, user), "pgbouncer") == 0;
}

/* Every worker's rows, each with its worker number last; the fan-outs' own connections left out. */
static void merge_per_worker(const struct merge *mg, struct admin_result *r)
{
	const char **v = xcalloc((size_t)mg->ref->ncols + 1, sizeof(*v));
	char wbuf[16];
	for (int i = 0; i < mg->nm; i++) {
		const struct member *m = &mg->m[i];
		if (is_leg_row(mg, m))
			continue;
		for (int c = 0; c < mg->ref->ncols; c++)
			v[c] = member_value(m, c);
		snprintf(wbuf, sizeof(wbuf), "%d", m->leg);
		v[mg->ref->ncols] = wbuf;
		admin_result_row(r, v);
	}
	free(v);
}

/* Takes the fan-out's own connections out of the row that counts them (struct own_legs). */
static void discount_legs(const struct merge *mg, const char **v, char (*bufs)[32])
{
	const struct own_legs *o = &mg->view->legs;
	if (!o->key || mg->ref->ncols < 2 || !v[0] || strcmp(v[0], o->key) != 0 ||
	    (o->key2 && (!v[1] || strcmp(v[1], o->key2) != 0)))
		return;
	int c = find_col(mg->ref, o->col);
	if (c < 0 || !v[c])
		return;
	long long n = num(v[c]) - mg->legs;
	snprintf(bufs[c], sizeof(bufs[c]), "%lld", n > 0 ? n : 0);
	v[c] = bufs[c];
}

/* One row per key (KEYED) or per name (NAME_VALUE). */
static void merge_grouped(struct merge *mg, struct admin_result *r)
{
	int ncols = mg->ref->ncols;
	bool by_name = mg->view->shape == VIEW_NAME_VALUE;
	sort_merge = mg;
	qsort(mg->m, (size_t)mg->nm, sizeof(*mg->m), cmp_member);
	/* group starts, in key order or in order of first appearance */
	const struct member **starts = xcalloc((size_t)mg->nm + 1, sizeof(*starts));
	int ng = 0;
	for (int i = 0; i < mg->nm; i++)
		if (i == 0 || cmp_key(mg, &mg->m[i - 1], &mg->m[i]) != 0)
			starts[ng++] = &mg->m[i];
	if (!mg->view->sorted)
		qsort(starts, (size_t)ng, sizeof(*starts), cmp_first_seen);
	const char **v = xcalloc((size_t)ncols, sizeof(*v));
	char (*bufs)[32] = xcalloc((size_t)ncols, sizeof(*bufs));
	for (int k = 0; k < ng; k++) {
		const struct member *g = starts[k];
		int n = 1;
		while (g + n < mg->m + mg->nm && cmp_key(mg, g, g + n) == 0)
			n++;
		for (int c = 0; c < ncols; c++) {
			const struct col_def *def = mg->rules[c];
			if (by_name && c == 1)
				def = rule_of(mg->view, member_value(g, 0));
			v[c] = merge_cell(g, n, c, def, by_name && c == 1, bufs[c], sizeof(bufs[c]));
		}
		discount_legs(mg, v, bufs);
		admin_result_row(r, v);
	}
	free(bufs);
	free(v);
	free(starts);
}

static void reply_show(struct fanout *fo)
{
	struct merge mg = { .view = fo->view };
	send_leg_notices(fo, false);
	int total = 0;
	for (int i = 0; i < fo->nlegs; i++) {
		const struct leg *leg = &fo->legs[i];
		if (leg->state == LEG_DONE && !leg->res.has_error && leg->res.ncols > 0) {
			if (!mg.ref)
				mg.ref = &leg->res;
			total += leg->res.nrows;
		}
	}
	if (!mg.ref) {
		const struct leg *err = NULL;
		for (int i = 0; i < fo->nlegs && !err; i++)
			if (fo->legs[i].res.has_error)
				err = &fo->legs[i];
		if (err)
			admin_reply_errorf(fo->client, "%s", err->res.message);
		else
			admin_reply_errorf(fo->client, "no worker answered: %s", fo->legs[0].res.failure);
		return;
	}
	int ncols = mg.ref->ncols;
	bool worker_col = fo->view->shape == VIEW_PER_WORKER;
	mg.m = xcalloc((size_t)total + 1, sizeof(*mg.m));
	mg.rules = xcalloc((size_t)ncols, sizeof(*mg.rules));
	for (int c = 0; c < ncols; c++)
		mg.rules[c] = fo->view->shape == VIEW_NAME_VALUE ? rule_of(fo->view, c == 0 ? NULL : "")
								 : rule_of(fo->view, mg.ref->names[c]);
	if (fo->view->shape == VIEW_NAME_VALUE) {
		static const struct col_def key = { NULL, COL_KEY, NULL };
		mg.rules[0] = &key;
	}
	for (int i = 0; i < fo->nlegs; i++) {
		const struct leg *leg = &fo->legs[i];
		if (leg->state != LEG_DONE || leg->res.has_error || leg->res.ncols != ncols)
			continue;
		for (int row = 0; row < leg->res.nrows; row++)
			mg.m[mg.nm++] = (struct member){ &leg->res, leg->worker, row };
		mg.legs++;
	}
	char *types = xmalloc((size_t)ncols + 2);
	const char **names = xcalloc((size_t)ncols + 1, sizeof(*names));
	for (int c = 0; c < ncols; c++)
		names[c] = mg.ref->names[c];
	names[ncols] = "worker";
	result_types(mg.ref, types, worker_col);
	struct admin_result r;
	admin_result_init(&r, 4096);
	admin_result_begin(&r, types, names);
	if (worker_col)
		merge_per_worker(&mg, &r);
	else
		merge_grouped(&mg, &r);
	admin_result_send(fo->client, &r);
	free(types);
	free(names);
	free(mg.rules);
	free(mg.m);
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
	return app && strcmp(app, FANOUT_APPNAME) == 0;
}

bool admin_fanout_wanted(const struct client *client)
{
	return workers_count() > 1 && !on_private_socket(client);
}

bool admin_fanout_show(struct client *client, const char *what, const char *query)
{
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		if (admin_word_is(what, views[i].name)) {
			fanout_begin(client, query, &views[i], false, 0);
			return true;
		}
	}
	return false;
}

void admin_fanout_control(struct client *client, const char *query, int worker, bool waits, const char *undo)
{
	fanout_begin(client, query, NULL, waits, worker);
	struct fanout *fo = fanout_of(client);	/* NULL if it has answered already */
	if (fo && undo)
		fo->undo = xstrdup(undo);
}
