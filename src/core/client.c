/*
 * client.c - client connections: the startup handshake, then the message
 * loop that hands each message to the client's server.
 *
 * State diagram: see client.h. client_set_state() is the only place that
 * changes a client's state and the list it sits in.
 *
 * The hot path (client_data_packet) looks at the message type only: it
 * asks the pool for a server when the client has none, tells the server
 * which replies to expect, and forwards the bytes untouched.
 *
 * Owns: struct client and its login data. Must not touch a server's
 * sockets directly: it goes through server.c and pool.c.
 */
#include "common.h"
#include "cancel_key.h"
#include "client.h"
#include "auth.h"
#include "config.h"
#include "log.h"
#include "reap.h"
#include "pgoptions.h"
#include "pool.h"
#include "proto.h"
#include "server.h"
#include "relay.h"
#include "sql_lex.h"
#include "tls.h"

#include <arpa/inet.h>
#include <unistd.h>

static bool client_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt);

/* Filled once at start-up by the modules behind the kinds (client.h); read-only after. */
const struct client_kind_ops *client_kinds[CLIENT_KINDS];

void client_register_kind(enum client_kind kind, const struct client_kind_ops *ops)
{
	client_kinds[kind] = ops;
}

/* The login route (client.h), if a feature registered one. */
static const struct login_route_ops *login_route;

void client_register_route(const struct login_route_ops *ops)
{
	login_route = ops;
}

bool client_owns_netbuf(const struct netbuf *nb)
{
	return netbuf_handler(nb) == client_handler;
}

/* ---------------------------------------------------------------- naming */

bool client_sockaddr(const struct client *client, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (client->is_unix)
		return false;
	if (client->is_ipv6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(client->addr.port);
		memcpy(&in6->sin6_addr, client->addr.ip, 16);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		in->sin_port = htons(client->addr.port);
		memcpy(&in->sin_addr, client->addr.ip, 4);
	}
	return true;
}

static void client_set_addr(struct client *client, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		client->is_ipv6 = true;
		client->addr.port = ntohs(in6->sin6_port);
		memcpy(client->addr.ip, &in6->sin6_addr, 16);
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		client->addr.port = ntohs(in->sin_port);
		memcpy(client->addr.ip, &in->sin_addr, 4);
	}
}

static void format_addr(const struct client *client, char *buf, size_t size, int *port)
{
	struct sockaddr_storage ss;
	if (!client_sockaddr(client, &ss) || !sockaddr_host_text((struct sockaddr *)&ss, buf, size, port)) {
		snprintf(buf, size, "unix");
		*port = pgv.cfg->listen_port;
	}
}

const char *client_user_name(const struct client *client)
{
	const struct client_login *login = client_login_state(client);
	if (login)
		return login->user[0] ? login->user : "(nouser)";
	if (client->shown_as_admin_user)
		return "pgbouncer";
	return client->ucount ? client->ucount->name : "(nouser)";
}

const char *client_db_name(const struct client *client)
{
	const struct client_login *login = client_login_state(client);
	if (login)
		return login->dbname[0] ? login->dbname : "(nodb)";
	return client->pool ? client->pool->db->name : "(nodb)";
}

const char *client_prefix(const struct client *client, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN + 2];
	int port = 0;
	format_addr(client, host, sizeof(host), &port);
	return log_prefix_text(buf, size, 'C', client, client_db_name(client), client_user_name(client), host, port);
}

/* ---------------------------------------------------------------- state */

static struct list *client_state_list(struct client *client, enum client_state state)
{
	struct pool *pool = client->pool;
	switch (state) {
	case CL_LOGIN:
		return &pgv.login_clients;
	case CL_WELCOME:
		return &pool->welcome_clients;
	case CL_IDLE:
		return &pool->idle_clients;
	case CL_ACTIVE:
		return &pool->active_clients;
	case CL_WAITING:
	case CL_PARAMS_WAITING:		/* in line with the queries: the same FIFO */
		return &pool->waiting_clients;
	case CL_PARAMS_CHECK:
		return &pool->active_clients;
	case CL_CLOSED:
		return &pgv.dead_clients;
	}
	return NULL;
}

/* Not logged in yet: its messages are the login's (client_login_packet). */
static bool in_login(enum client_state state)
{
	return state == CL_LOGIN || state == CL_WELCOME || state == CL_PARAMS_WAITING || state == CL_PARAMS_CHECK;
}

void client_set_state(struct client *client, enum client_state state)
{
	if (list_node_linked(&client->node))
		list_remove(client_state_list(client, client->state), &client->node);
	client->state = state;
	list_append(client_state_list(client, state), &client->node);
	if (state == CL_CLOSED)
		reap_schedule();
}

/* ---------------------------------------------------------------- accept */

void client_accept(int fd, const struct sockaddr *addr, socklen_t addrlen, bool is_unix)
{
	struct client *client = xcalloc(1, sizeof(*client));

	netbuf_init(&client->nb, client_handler, NETBUF_LIMIT_STARTUP);
	client->nb.startup = true;
	client->id = ++pgv.next_conn_id;
	client->connect_time = now_usec();
	/* TCP listeners accept during a shutdown only to hand the port off: those clients count as earlier. */
	client->accepted_in_shutdown = pgv.shutting_down && is_unix;
	client->request_time = client->connect_time;
	client->is_unix = is_unix;
	if (!is_unix && addrlen >= sizeof(struct sockaddr_in))
		client_set_addr(client, addr);
	client->login = xcalloc(1, sizeof(*client->login));
	client->login->phase = LOGIN_STARTUP;
	list_node_init(&client->node);
	client_set_state(client, CL_LOGIN);
	pgv.client_count++;
	/* With TLS configured, a client may open with a ClientHello (PostgreSQL 17's direct TLS). */
	client->nb.detect_tls = !is_unix && tls_client_side_ready();
	netbuf_accept(&client->nb, fd);
	/* TCP_DEFER_ACCEPT woke us only once the startup packet arrived: read it now, not a loop turn later. */
	if (!is_unix && pgv.cfg->tcp_defer_accept)
		netbuf_read_now(&client->nb);
}

/* ---------------------------------------------------------------- errors */

void client_send_error(struct client *client, const char *severity, const char *sqlstate, const char *msg)
{
	uint8_t mem[1024];
	struct pktbuf b;
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_error(&b, severity, sqlstate, msg);
	if (b.failed) {
		pktbuf_reset(&b);
		proto_put_error(&b, severity, sqlstate, "error message too long");
	}
	netbuf_send(&client->nb, b.buf, b.len);
}

void client_close(struct client *client, const char *sqlstate, const char *reason)
{
	if (client->state == CL_CLOSED)
		return;

	struct pool *pool = client->pool;
	usec_t age = (now_usec() - client->connect_time) / USEC_PER_SEC;

	/* An error in the middle of a forwarded server message would corrupt the client's stream. */
	bool mid_message = client->link && client->link->nb.pkt_remaining;
	if (sqlstate && !client->logged_in)
		metrics_count_login_error(sqlstate, reason);
	/* Logged before the client hears it, so a log read right after the client's error has the line. */
	if (!client->quiet && (client->logged_in ? pgv.cfg->log_disconnections :
				(sqlstate != NULL || pgv.cfg->log_connections)))
		client_log(LOG_LEVEL_INFO, client, "closing because: %s (age=%llds)", reason, (long long)age);
	if (sqlstate && !mid_message) {
		if (pgv.cfg->log_pooler_errors)
			client_log(LOG_LEVEL_WARNING, client, "pooler error: %s", reason);
		client_send_error(client, "FATAL", sqlstate, reason);
	}

	if (client->notify)	/* its channels go before its server does, so nothing is sent to it any more */
		relay_call_if(notify_client_free, client);
	if (client->link) {
		struct server *server = client->link;
		pool_release_server(server);
	}
	const struct client_kind_ops *ops = client_kinds[client->kind];
	if (ops && ops->closing)
		ops->closing(client);	/* a replication client's server goes too; the console's waits end */
	cancel_index_remove(client);
	if (pgv.hooks.client_closing)
		pgv.hooks.client_closing(client);
	if (client->quiet)
		server_cancel_requester_gone(client);
	pool_cancel_auth_query(client);
	if (client->login && !client->logged_in && client->login->route && login_route && login_route->closing)
		login_route->closing(client);
	if (client->ucount)
		client->ucount->clients--;	/* the reference, and so its name, stays until client_free */
	if (client->counted_in_db)
		pool->db->client_count--;
	if (client->budget_token && pgv.budget)
		pgv.budget->client_return(client->budget_token);
	client->budget_token = 0;
	if (pool)
		pool->db->last_used = pool->last_used = now_usec();
	if (pool && !client->logged_in && pool_login_abandoned(client))
		client->pool = NULL;
	netbuf_close(&client->nb);
	client_set_state(client, CL_CLOSED);
	pgv.client_count--;
	/*
	 * No pool_after_change() here: a leaving client creates no demand, and
	 * opening servers from inside a close could close sibling clients that
	 * a caller is iterating over.
	 */
	instance_client_gone();
}

void client_free(struct client *client)
{
	auth_login_free(client_login_state(client));
	relay_call_if(prep_client_free, client);
	if (client->balance_state || client->balance_retry)
		relay_call(balance_client_free, client);
	varcache_unref(client->vars);
	relay_call_if(sets_client_free, client);
	free(client_repl(client));
	if (client->ucount)
		pool_user_unref(client->ucount);
	free(client);
}

/* ---------------------------------------------------------------- login */

static void handle_ssl_request(struct client *client, bool gssenc)
{
	if (gssenc || !tls_client_side_ready()) {
		netbuf_send(&client->nb, "N", 1);
		return;
	}
	/*
	 * Bytes already sent behind the SSLRequest would be read as if they
	 * had come through TLS (CVE-2021-23214): refuse them.
	 */
	if (netbuf_buffered(&client->nb)) {
		client_close(client, "08P01", "unexpected data after SSL request");
		return;
	}
	netbuf_send(&client->nb, "S", 1);
	if (netbuf_start_tls(&client->nb, tls_new_client_ssl(), true) < 0)
		client_close(client, "08P01", "could not start TLS");
}

/* The handshake is done: the startup packet comes next, now encrypted. */
static void client_tls_ready(struct client *client)
{
	if (client->direct_tls) {
		if (!netbuf_tls_alpn_postgresql(&client->nb)) {
			client_close(client, "08P01", "direct TLS connection without ALPN \"postgresql\"");
			return;
		}
	}
	client->nb.startup = true;
	netbuf_resume(&client->nb);
}

/*
 * Startup parameters PgBouncer always accepts; anything else needs
 * ignore_startup_parameters (or track_extra_parameters).
 */
static bool startup_param_allowed(const char *name)
{
	static const char *const accepted[] = { "user", "database", "replication" };
	for (size_t i = 0; i < ARRAY_SIZE(accepted); i++)
		if (strcmp(name, accepted[i]) == 0)
			return true;
	return varcache_settable(varcache_index(name));
}

/* "_pq_.name": a protocol extension the client offers; none is spoken yet. */
static bool is_protocol_option(const char *name)
{
	return strncmp(name, "_pq_.", 5) == 0;
}

/*
 * As PostgreSQL 18: protocol 3.0 and 3.2 are spoken as asked. A client
 * asking for a newer minor (PostgreSQL 19's 3.9999 among them) or 3.1
 * (never used: it collided with old PgBouncers), or offering _pq_
 * options, is told with NegotiateProtocolVersion the newest version below
 * its own that is spoken (3.2, 3.0 for 3.1) and which options were not
 * recognized, and the login goes on in that version (libpq's
 * max_protocol_version relies on it). What pgvalve speaks with its servers
 * does not change: 3.2 differs only in BackendKeyData and CancelRequest,
 * which pgvalve makes and reads itself. Returns false if the client was
 * closed.
 */
static bool negotiate_protocol(struct client *client, const struct startup_params *sp)
{
	const char *unknown[STARTUP_MAX_PARAMS];
	int count = 0;
	unsigned minor = sp->version & 0xffff;
	for (int i = 0; i < sp->count; i++)
		if (is_protocol_option(sp->names[i]))
			unknown[count++] = sp->names[i];
	unsigned agreed = minor >= 2 ? 2 : 0;
	client->login->proto_minor = (uint8_t)agreed;
	if ((minor == 0 || minor == 2) && count == 0)
		return true;
	struct pktbuf b;
	pktbuf_init(&b, 64);
	proto_put_negotiate_version(&b, PROTO_VERSION_3 + agreed, unknown, count);
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);
	return client->state != CL_CLOSED;
}

/* user and database from the startup packet, the protocol version agreed. False if the client was closed. */
static bool startup_names(struct client *client, const struct startup_params *sp)
{
	struct client_login *login = client->login;
	const char *user = startup_param(sp, "user");
	const char *dbname = startup_param(sp, "database");

	if (!user || !user[0]) {
		client_close(client, "08P01", "no username supplied");
		return false;
	}
	if (!dbname || !dbname[0])
		dbname = user;
	if (!negotiate_protocol(client, sp))
		return false;
	if (strlen(user) >= sizeof(login->user) || strlen(dbname) >= sizeof(login->dbname)) {
		client_close(client, "08P01", "user or database name too long");
		return false;
	}
	strlcpy_s(login->user, user, sizeof(login->user));
	strlcpy_s(login->dbname, dbname, sizeof(login->dbname));
	return true;
}

/* Every startup parameter is one pgvalve takes or is told to ignore. False if the client was closed. */
static bool startup_params_supported(struct client *client, const struct startup_params *sp)
{
	for (int i = 0; i < sp->count; i++) {
		const char *name = sp->names[i];
		if (startup_param_allowed(name) || is_protocol_option(name) || strcmp(name, "options") == 0)
			continue;
		if (config_list_contains(pgv.cfg->ignore_startup_parameters, name))
			continue;
		char msg[256];
		snprintf(msg, sizeof(msg), "unsupported startup parameter: %s", name);
		client_close(client, "08P01", msg);
		return false;
	}
	return true;
}

/* The first registered kind that claims the login, else pooled. False if the client was closed. */
static bool choose_kind(struct client *client, const struct startup_params *sp)
{
	for (int k = CLIENT_POOLED + 1; k < CLIENT_KINDS; k++) {
		const struct client_kind_ops *ops = client_kinds[k];
		if (!ops || !ops->claim)
			continue;
		int claimed = ops->claim(client, sp, client->login->dbname);
		if (claimed < 0)
			return false;
		if (claimed > 0) {
			client->kind = (enum client_kind)k;
			return true;
		}
	}
	return true;
}

/*
 * options: its -c settings are startup parameters too, under the same
 * rules (as PgBouncer). "options" in ignore_startup_parameters ignores
 * the settings pgvalve does not track, never the tracked ones (TimeZone,
 * DateStyle, ...), as in PgBouncer. target_session_attrs is pgvalve's
 * (the read balancer's, in session pooling) and never refused. A
 * replication client's goes to its
 * own server verbatim instead (replication.c). False if the client was
 * closed.
 */
static bool startup_options(struct client *client, const char *options)
{
	if (!options || client->kind == CLIENT_REPLICATION)
		return true;
	char msg[256];
	struct pgoptions opts = { 0 };
	if (!pgoptions_parse(options, &opts, msg, sizeof(msg))) {
		client_close(client, "08P01", msg);
		return false;
	}
	bool ignore_all = config_list_contains(pgv.cfg->ignore_startup_parameters, "options");
	for (int i = 0; i < opts.count; i++) {
		if (strcmp(opts.names[i], "target_session_attrs") == 0) {
			/* pgvalve's, never the server's: a session pooling client asking for a standby (balance.h) */
			client->asks_standby = strcmp(opts.values[i], "read-only") == 0 ||
					       strcmp(opts.values[i], "standby") == 0 ||
					       strcmp(opts.values[i], "prefer-standby") == 0;
			continue;
		}
		if (varcache_index(opts.names[i]) >= 0 || ignore_all ||
		    config_list_contains(pgv.cfg->ignore_startup_parameters, opts.names[i]))
			continue;
		snprintf(msg, sizeof(msg), "unsupported startup parameter in options: %s", opts.names[i]);
		pgoptions_free(&opts);
		client_close(client, "08P01", msg);
		return false;
	}
	/* Remembered now; the startup packet's own parameters, set later, win (as in PostgreSQL). */
	for (int i = 0; i < opts.count; i++)
		if (varcache_index(opts.names[i]) >= 0)
			varcache_set_by_name(&client->vars, opts.names[i], opts.values[i]);
	pgoptions_free(&opts);
	return true;
}

/*
 * The database the login asks for, if the pooler takes it in now: not
 * while shutting down, not over max_client_conn or the database's and
 * user's client limits. NULL if the client was closed.
 */
static struct db *startup_admit(struct client *client, struct db *routed, const char *dbname, const char *user,
				 bool *db_known)
{
	bool console = client_is_console(client);
	/*
	 * SIGTERM and a drain wait for clients: one that connected before (its
	 * startup packet may come an SSLRequest later; a drain also takes in
	 * what the kernel had queued) is one of them, or a rolling restart
	 * would fail it; the drain closes it after its first transaction
	 * (drain.h). Other shutdowns refuse every new login.
	 */
	bool waits_for_clients = pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_CLIENTS || pgv.shutdown_mode == SHUTDOWN_DRAIN;
	if (pgv.shutting_down && !console && (client->accepted_in_shutdown || !waits_for_clients)) {
		client_close(client, "57P03", "pooler is shutting down");
		return NULL;
	}
	/* As PgBouncer: the admin console stays reachable when the pooler is full. */
	if (!console && pgv.client_count > (uint32_t)pgv.cfg->max_client_conn) {
		client_close(client, "08P01", "no more connections allowed (max_client_conn)");
		return NULL;
	}
	*db_known = console || routed || pool_find_db(dbname);
	struct db *db = console ? pgv.admin_db : routed ? routed : pool_find_or_autodb(dbname);
	if (!db)
		db = pool_fake_db(dbname);	/* authentication first; "no such database" after it */
	const char *limit = pool_client_limit_reached(db, user, &client->budget_token);
	if (limit) {
		client_close(client, "08P01", limit);
		return NULL;
	}
	return db;
}

/* The replication= of PgBouncer 1.26's "login attempt" line: no, database (logical) or yes (physical). */
static const char *login_replication(const struct client *client, const struct startup_params *sp)
{
	if (client->kind != CLIENT_REPLICATION)
		return "no";	/* without looking: a pooled login pays for no search of its parameters */
	const char *value = startup_param(sp, "replication");
	if (value == NULL)
		return "no";
	return strcmp(value, "database") == 0 ? "database" : "yes";
}

/*
 * A pooled login the route takes (client.h): 1 routed, 0 not, -1 the
 * client was closed. *options: the options left for startup_options.
 */
static int route_login(struct client *client, const struct startup_params *sp, char **options)
{
	if (client->kind != CLIENT_POOLED || !login_route || !login_route->route)
		return 0;
	return login_route->route(client, sp, options);
}

/* Its database chosen (by name, or by its route): admitted, counted in its pool, and on to authentication. */
static void login_continue(struct client *client, struct db *routed)
{
	const char *user = client->login->user;
	const char *dbname = client->login->dbname;
	bool db_known = false;
	struct db *db = startup_admit(client, routed, dbname, user, &db_known);
	if (!db)
		return;
	if (pgv.cfg->log_connections) {
		char tls[160];
		netbuf_tls_describe(&client->nb, tls, sizeof(tls));
		client_log(LOG_LEVEL_INFO, client, "login attempt: db=%s user=%s tls=%s replication=%s", db->name, user,
			   tls[0] ? tls : "no", client->login->replication_word);
	}
	client->pool = pool_get_for_login(db, user, !db_known);
	client->ucount = pool_user_ref(user);
	client->ucount->clients++;
	db->client_count++;
	client->counted_in_db = true;
	db->last_used = now_usec();
	const struct client_kind_ops *ops = client_kinds[client->kind];
	if (ops && ops->check_login && !ops->check_login(client, user))
		return;
	auth_begin(client);
}

void client_route_done(struct client *client, struct db *db)
{
	client->login->phase = LOGIN_STARTUP;	/* what auth_begin starts from */
	netbuf_resume(&client->nb);
	login_continue(client, db);
}

static void handle_startup(struct client *client, const struct startup_params *sp)
{
	if (!startup_names(client, sp) || !startup_params_supported(client, sp) || !choose_kind(client, sp))
		return;
	char *options = NULL;
	int routed = route_login(client, sp, &options);
	bool ok = routed >= 0 && startup_options(client, options ? options : startup_param(sp, "options"));
	free(options);
	if (!ok)
		return;
	client->login->replication_word = login_replication(client, sp);

	/* Remember tracked parameters the client asked for (read-only ones are the server's to say). */
	for (int i = 0; i < sp->count; i++) {
		int idx = varcache_index(sp->names[i]);
		if (varcache_settable(idx))
			varcache_set(&client->vars, idx, sp->values[i]);
	}
	if (!routed) {
		login_continue(client, NULL);
		return;
	}
	client->login->phase = LOGIN_ROUTE;
	struct db *db = login_route->resolve(client);
	if (db) {	/* known: on at once */
		client->login->phase = LOGIN_STARTUP;
		login_continue(client, db);
	} else {
		/* Held (unless the route closed it, or already handed it on with client_route_done) */
		const struct client_login *login = client_login_state(client);
		if (client->state != CL_CLOSED && login && login->phase == LOGIN_ROUTE)
			netbuf_pause(&client->nb);	/* nothing may arrive before the authentication request */
	}
}

/*
 * A CancelRequest: 16 bytes (protocol 3.0's 4-byte key) or, from a 3.2
 * client, 12 plus a key of up to 256 bytes. Anything else is logged and
 * closed. False if the client was closed.
 */
static bool client_cancel_packet(struct client *client, const struct pkt *pkt)
{
	struct cancel_request req;
	uint32_t key_len = pkt->len - 12;
	if (pkt->len < 12 + CANCEL_KEY_SHORT_LEN || key_len > CANCEL_KEY_MAX) {
		client_log(LOG_LEVEL_WARNING, client, "cancel request of %u bytes: not a valid CancelRequest, ignored",
			   pkt->len);
		client_close(client, NULL, "bad cancel request");
		return false;
	}
	const uint8_t *body = pkt_body(pkt);
	req.pid = proto_read_be32(body + 4);
	req.key_len = (uint16_t)key_len;
	memcpy(req.key, body + 8, key_len);
	client->quiet = true;
	netbuf_pause(&client->nb);	/* nothing more is read from a cancel connection */
	if (!client_handle_cancel(client, &req))
		client_close(client, NULL, "cancel request");
	return client->state != CL_CLOSED;
}

static bool client_login_packet(struct client *client, const struct pkt *pkt)
{
	struct client_login *login = client->login;

	if (login->phase == LOGIN_STARTUP) {
		if (!pkt_complete(pkt))
			return true;	/* bounded by PROTO_STARTUP_MAX */
		struct pkt_reader r;
		pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
		uint32_t code = pkt_get_uint32(&r);
		netbuf_skip(&client->nb, pkt->len);

		if (code == PROTO_SSL_REQUEST || code == PROTO_GSSENC_REQUEST) {
			if (pkt->len != 8 || netbuf_is_tls(&client->nb)) {
				client_close(client, "08P01", "bad SSL request");
				return false;
			}
			handle_ssl_request(client, code == PROTO_GSSENC_REQUEST);
			return client->state != CL_CLOSED;
		}
		if (code == PROTO_CANCEL_REQUEST)
			return client_cancel_packet(client, pkt);
		if (!netbuf_is_tls(&client->nb) && !client->is_unix && pgv.cfg->client_tls_sslmode >= TLS_SSLMODE_REQUIRE) {
			metrics_count_authentication_failure(pgv.cfg->auth_type, METRICS_AUTH_TLS_REQUIRED);
			client_close(client, "28000", "SSL required");
			return false;
		}
		if ((code >> 16) != 3) {
			char msg[96];
			snprintf(msg, sizeof(msg), "unsupported frontend protocol %u.%u: server supports 3.0 to 3.2",
				 code >> 16, code & 0xffff);
			client_close(client, "0A000", msg);
			return false;
		}
		struct startup_params sp;
		const char *err = NULL;
		if (!proto_parse_startup(pkt_body(pkt), pkt_body_len(pkt), &sp, &err)) {
			client_close(client, "08P01", err);
			return false;
		}
		client->nb.startup = false;
		netbuf_set_limit(&client->nb, NETBUF_LIMIT_AUTH);	/* passwords up to 65,530 bytes (PgBouncer 1.26) */
		handle_startup(client, &sp);
		return client->state != CL_CLOSED;
	}

	if (login->phase == LOGIN_PASSWORD || login->phase == LOGIN_SASL_INITIAL ||
	    login->phase == LOGIN_SASL_RESPONSE || login->phase == LOGIN_GSS) {
		if (pkt->type != 'p') {
			client_close(client, "08P01", "expected a password message");
			return false;
		}
		if (!pkt_complete(pkt))
			return true;
		netbuf_skip(&client->nb, pkt->len);
		auth_handle_password(client, pkt_body(pkt), pkt_body_len(pkt));
		return client->state != CL_CLOSED;
	}

	/* LOGIN_DONE: waiting for the pool; nothing may arrive before ReadyForQuery. */
	netbuf_pause(&client->nb);
	return true;
}

/* [AuthenticationSASLFinal and] AuthenticationOk, once: the password was right. */
static void put_auth_ok(struct client *client, struct pktbuf *b)
{
	struct client_login *login = client->login;
	if (login->auth_ok_sent)
		return;
	/* a SCRAM login's AuthenticationSASLFinal (auth.c) goes out with it, as PostgreSQL sends it */
	if (login->sasl_final_len)
		pktbuf_put_bytes(b, login->sasl_final, login->sasl_final_len);
	proto_put_auth_request(b, AUTH_REQ_OK, NULL, 0);
	login->auth_ok_sent = true;
}

/*
 * The rest of the login in one write: the parameters, BackendKeyData,
 * ReadyForQuery; then what only a login needed goes. With client_values,
 * the client's own values replace the given ones (a pooled client: the
 * pool's parameters, its server brought in line later). The caller sets
 * the state the client goes on in.
 */
static void send_welcome(struct client *client, const struct welcome_param *params, int count,
			 bool client_values, char txn_status)
{
	struct pktbuf b;
	pktbuf_init(&b, 512);

	put_auth_ok(client, &b);
	for (int i = 0; i < count; i++) {
		const char *value = params[i].value;
		int idx = params[i].var_idx;
		if (client_values && idx >= 0 && varcache_get(client->vars, idx))
			value = varcache_get(client->vars, idx);
		proto_put_parameter_status(&b, params[i].name, value);
	}
	bool long_key = client->login->proto_minor >= 2;
	/* The login goes before the client enters the cancel index: they share a slot. */
	auth_login_free(client->login);
	client->login = NULL;
	client->logged_in = true;
	do
		cancel_key_make(pgv.cfg->peer_id, &client->cancel_pid, &client->cancel_key);
	while (cancel_index_find(client->cancel_pid, client->cancel_key));
	cancel_index_add(client);
	if (long_key) {
		uint8_t key[CANCEL_KEY_LONG_LEN];
		cancel_key_make_long(client->cancel_pid, client->cancel_key, client->nb.fd, client->is_unix, key);
		client->cancel_long = true;
		proto_put_backend_key_bytes(&b, client->cancel_pid, key, sizeof(key));
	} else {
		proto_put_backend_key(&b, client->cancel_pid, client->cancel_key);
	}
	/* login_notify_message (PgBouncer 1.26): where PostgreSQL allows a NOTICE, before ReadyForQuery */
	if (pgv.cfg->login_notify_message[0])
		proto_put_notice(&b, "00000", pgv.cfg->login_notify_message);
	proto_put_ready(&b, txn_status);
	netbuf_send(&client->nb, b.buf, b.len);
	pktbuf_free(&b);

	client->pool->db->stats.total.client_login_count++;
	netbuf_set_limit(&client->nb, NETBUF_LIMIT_CLIENT);	/* and out of the login priority (netbuf.h) */
	client->request_time = now_usec();
}

/* A pooled client's welcome: the pool's parameters with its own values. */
static void send_pool_welcome(struct client *client)
{
	send_welcome(client, client->pool->welcome, client->pool->welcome_count, true, 'I');
}

void client_finish_replication_login(struct client *client, const struct welcome_param *params, int count,
				     char txn_status)
{
	send_welcome(client, params, count, false, txn_status);
	client_set_state(client, CL_ACTIVE);
	netbuf_resume(&client->nb);
}

/*
 * PostgreSQL applies a client's startup parameters at login and fails the
 * login with FATAL when it refuses a value (22023 invalid value for
 * parameter ...); pgvalve's own SETs run later, on whichever server the
 * client gets. So a login asking for a value that no server of the pool is
 * known to accept (the pool's own value, or one a server took from an
 * earlier login: varcache_all_accepted) has a server try its values
 * before ReadyForQuery, through the usual queue and the usual apply
 * (server_apply_client_vars): refused, the client gets the server's error
 * as FATAL and nothing else changes; taken, the values are remembered for
 * the next logins and the login finishes. Logins with the pool's values
 * (most: no startup parameters, or the same ones as every other client of
 * the application) cost nothing.
 *
 * AuthenticationOk goes out first, as PostgreSQL sends it before it looks
 * at the parameters (a query_wait_notify NOTICE may follow it; libpq
 * refuses one before it).
 */
static void start_params_check(struct client *client)
{
	uint8_t mem[SCRAM_MSG_MAX + 32];
	struct pktbuf b;
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	put_auth_ok(client, &b);
	netbuf_send(&client->nb, b.buf, b.len);
	client_log(LOG_LEVEL_DEBUG, client, "startup parameters new to the pool: a server tries them first");
	netbuf_pause(&client->nb);	/* nothing may arrive before ReadyForQuery */
	pool_request_server(client);	/* queued, linked (the answer comes later), or closed */
}

void client_finish_login(struct client *client)
{
	struct pool *pool = client->pool;
	/* The pool's values for whatever the client did not ask for, shared with logins that have the same. */
	varcache_share_login(&client->vars, pool->welcome_vars, &pool->login_vars);
	if (!client_is_console(client) && !varcache_all_accepted(client->vars, pool->welcome_vars, &pool->accepted_vars)) {
		start_params_check(client);
		return;
	}
	send_pool_welcome(client);
	client_set_state(client, CL_IDLE);
	netbuf_resume(&client->nb);
}

/* Logins queued for a check whose values all became known good need no server of their own. */
static void finish_accepted_logins(struct pool *pool)
{
	list_for_each_safe(pos, tmp, &pool->waiting_clients) {
		struct client *c = container_of(pos, struct client, node);
		if (c->state != CL_PARAMS_WAITING ||
		    !varcache_all_accepted(c->vars, pool->welcome_vars, &pool->accepted_vars))
			continue;
		send_pool_welcome(c);
		client_set_state(c, CL_IDLE);
		netbuf_resume(&c->nb);
	}
}

/*
 * The server took every startup value of a login in PARAMS_CHECK. In
 * session mode the client keeps that server (it would at its first query
 * anyway, and the server is in line with it already), unless the read
 * balancer places it at its first query (a read-only session may belong
 * on a standby); otherwise the server goes back to the pool as after a
 * transaction.
 */
static void params_taken(struct client *client)
{
	struct pool *pool = client->pool;
	struct server *server = client->link;
	finish_accepted_logins(pool);	/* the values were accepted by the server (server.c set_params_done) */
	send_pool_welcome(client);
	client_set_state(client, CL_ACTIVE);
	netbuf_resume(&client->nb);
	if (pool_effective_mode(pool) != POOL_MODE_SESSION || relay_balance_enabled(pool))
		pool_release_server(server);	/* unlinks: the client goes IDLE */
}

/* ---------------------------------------------------------------- data */

/* A message that may start a transaction's work (the read balancer's holds). */
static bool starts_statement(uint8_t type)
{
	return type == 'Q' || type == 'P' || type == 'B' || type == 'F';
}

/*
 * The read balancer: a client between transactions starting one with pkt
 * may be lent to its pool's standby companion for it. False: pkt is a
 * short message not whole yet (offered again when it is).
 */
static bool balance_route(struct client *client, const struct pkt *pkt)
{
	if (client->state != CL_IDLE)
		return true;
	if (!pkt_complete(pkt))
		return pkt->len > BALANCE_QUERY_MAX;
	struct pool *to = relay_hooks.balance_pick(client, pkt);
	if (to && to != client->pool)
		pool_lend_client(client, to);
	return true;
}

bool relay_text_of(const struct pkt *pkt, struct relay_text *rt)
{
	const char *body = (const char *)pkt_body(pkt);
	size_t len = pkt_body_len(pkt);
	rt->named = false;
	if (pkt->type == 'P') {	/* the statement name first */
		size_t name_len = len > 0 && body[0] == '\0' ? 0 : strnlen(body, len);
		if (name_len >= len)
			return false;
		rt->named = name_len > 0;
		body += name_len + 1;
		len -= name_len + 1;
	}
	if (pkt->type == 'Q' && len > 0 && body[len - 1] == '\0') {
		rt->len = len - 1;	/* the common case: the Query ends with its NUL */
	} else if (pkt->type == 'P' && len >= 3 && body[len - 3] == '\0' && body[len - 2] == 0 && body[len - 1] == 0) {
		rt->len = len - 3;	/* no parameter types: the text, its NUL, a zero count */
	} else if (pkt->type == 'P' && len >= 7 && body[len - 7] == '\0' && body[len - 6] == 0 && body[len - 5] == 1) {
		rt->len = len - 7;	/* one: the count 1, then the type's 4 bytes */
	} else if ((rt->len = strnlen(body, len)) >= len) {
		return false;
	}
	rt->sql = body;
	rt->marks = sql_marks(body, rt->len);
	return true;
}

/*
 * A Query or Parse on its way to server, its text cut once for the
 * features that read it: notifications (true: the client was paused, the
 * message is offered again later, nothing of it noted) and session SETs.
 */
static bool notes_statement_waits(struct client *client, struct server *server, const struct pkt *pkt,
				  bool track_notify, bool track_set)
{
	struct relay_text rt;
	bool text = pkt_complete(pkt) && relay_text_of(pkt, &rt);
	if (track_notify && text && relay_call(notify_note_client, client, server, &rt))
		return true;
	if (track_set) {
		if (text || !pkt_complete(pkt))
			relay_call(sets_note_query, server, pkt, text ? &rt : NULL);
		if (client->sets_learn_always)	/* a statement it prepared may change settings (session_set.h) */
			server->sets_learn = true;
	}
	return false;
}

static bool client_data_packet(struct client *client, const struct pkt *pkt)
{
	switch (pkt->type) {
	case 'X':	/* Terminate: the server stays with the pool */
		netbuf_skip(&client->nb, pkt->len);
		client_close(client, NULL, "client close request");
		return false;
	case 'Q': case 'P': case 'B': case 'D': case 'E': case 'C': case 'H': case 'S':
	case 'F': case 'd': case 'c': case 'f':
		break;
	default: {
		char msg[64];
		snprintf(msg, sizeof(msg), "unsupported message type: 0x%02x", pkt->type);
		client_close(client, "08P01", msg);
		return false;
	}
	}

	if (pkt->type == 'Q' && pgv.cfg->disable_pqexec) {
		/* As PgBouncer, the console included: only the extended protocol gets through. */
		client_log(LOG_LEVEL_ERROR, client, "client used \"Query\" packet type");
		client_close(client, "08P01", "PQexec disallowed");
		return false;
	}
	const struct client_kind_ops *ops = client_kinds[client->kind];
	if (ops && ops->data_packet)
		return ops->data_packet(client, pkt);
	bool track_set = (pkt->type == 'Q' || pkt->type == 'P') && relay_sets_enabled(client->pool);
	if (track_set && !pkt_complete(pkt) && pkt->len <= SESSION_SET_QUERY_MAX)
		return true;	/* a short query: read all of it, it may change settings (longer ones are learned) */
	bool track_notify = (pkt->type == 'Q' || pkt->type == 'P') && relay_notify_enabled(client->pool);
	if (track_notify && !pkt_complete(pkt) && pkt->len <= NOTIFY_QUERY_MAX)
		return true;	/* it may be a LISTEN: read all of it (longer ones are not parsed) */
	bool copy_msg = pkt->type == 'd' || pkt->type == 'c' || pkt->type == 'f';
	if (!client->link && (pkt->type == 'H' || copy_msg)) {
		/*
		 * A Flush, or the rest of a COPY whose server is gone, between
		 * transactions: no server has anything for it (PostgreSQL drops
		 * such COPY data too), and none is taken for it (as PgBouncer 1.26).
		 */
		client_log(LOG_LEVEL_DEBUG, client, "discarding a late %s message (0x%02x), no server linked",
			   copy_msg ? "COPY" : "Flush", pkt->type);
		netbuf_skip(&client->nb, pkt->len);
		return true;
	}
	if (!client->link && (pkt->type == 'Q' || pkt->type == 'P' || pkt->type == 'B') &&
	    relay_balance_enabled(client->pool) && !balance_route(client, pkt))
		return true;	/* the rest of a short Query, Parse or Bind first */
	if (client->lent && client->link && client->link->expect_ready && starts_statement(pkt->type) &&
	    pool_effective_mode(client->pool) != POOL_MODE_SESSION) {
		/*
		 * Pipelined past the end of a transaction lent to a standby: the
		 * next one is placed on its own once the server answered (a write
		 * must not follow a read there). Resumed by client_ready_seen.
		 * (Session pooling: the client keeps its server anyway.)
		 */
		client->held_for_ready = true;
		netbuf_pause(&client->nb);
		return true;
	}
	if (!client->link) {
		/* (a read lent to the standby pool may be linked at once on the primary: pool.c standby_waiters_home) */
		if (!pool_request_server(client) && !client->link)
			return client->state != CL_CLOSED;	/* queued and paused; offered again when linked */
		if (client->nb.paused)
			return true;	/* linked, server is applying our parameters first */
	}
	if (client->balance_control_only && starts_statement(pkt->type)) {
		/* the read balancer: an empty transaction (BEGIN, COMMIT) is a read; its texts are short */
		if (!pkt_complete(pkt) && pkt->len <= BALANCE_QUERY_MAX)
			return true;
		relay_call(balance_statement, client, pkt);
	}
	bool track = relay_prep_enabled(client->pool);
	if (track && relay_prep_needs_whole(pkt->type) && !pkt_complete(pkt))
		return true;	/* statement names are rewritten: the whole message first */
	if (track && relay_prep_needs_whole(pkt->type) && relay_call(prep_client_waits, client, client->link, pkt))
		return true;	/* paused: offered again once the server answered what the name hangs on */
	struct server *server = client->link;
	if ((track_notify | track_set) && notes_statement_waits(client, server, pkt, track_notify, track_set))
		return true;	/* paused: offered again once the pool's listener has its new channels */
	/* Parses and Binds are counted by prepare.c: the named statements it manages only, as PgBouncer. */
	client->pool->db->stats.total.bytes_received += pkt->len;
	server_note_client_message(server, pkt->type);
	if (track && relay_call(prep_client_message, client, server, pkt))
		return client->state != CL_CLOSED;
	netbuf_forward(&client->nb, pkt->len);
	/*
	 * The CopyDone or CopyFail of a COPY that failed before it (the
	 * server's ReadyForQuery went out already): nothing more will come
	 * from the server, so between transactions it goes back to the pool.
	 */
	if (copy_msg && pkt->type != 'd' && pool_effective_mode(client->pool) != POOL_MODE_SESSION &&
	    server_is_clean(server))
		pool_release_server(server);
	return true;
}

enum client_state client_waiting_state(const struct client *client)
{
	return in_login(client->state) ? CL_PARAMS_WAITING : CL_WAITING;
}

/*
 * A client is told its current server's in_hot_standby, not what its
 * login's server said: after a failover, or a prefer-standby database
 * falling back on the primary, the two differ. One pointer comparison
 * per link (values are interned).
 */
static __attribute__((noinline)) void tell_server_role(struct client *client, const struct server *server)
{
	static int idx = -2;
	if (idx == -2)
		idx = varcache_index("in_hot_standby");
	const char *value = varcache_get(server->vars, idx);
	if (!value || value == varcache_get(client->vars, idx) || !client->logged_in)
		return;
	uint8_t mem[64];
	struct pktbuf b;
	pktbuf_init_fixed(&b, mem, sizeof(mem));
	proto_put_parameter_status(&b, "in_hot_standby", value);
	if (b.failed)
		return;
	netbuf_send(&client->nb, b.buf, b.len);
	varcache_set(&client->vars, idx, value);
}

void client_linked(struct client *client)
{
	if (server_hot_standby_mixed && client->link)	/* one load per link while every server agrees */
		tell_server_role(client, client->link);
	client->wait_notified = false;
	client->request_time = now_usec();
	if (!in_login(client->state))
		client->served = true;
	client_set_state(client, in_login(client->state) ? CL_PARAMS_CHECK : CL_ACTIVE);
}

void client_server_in_line(struct client *client)
{
	if (client->state == CL_PARAMS_CHECK)
		params_taken(client);
	else
		netbuf_resume(&client->nb);
}

void client_ready_seen(struct client *client)
{
	if (client->held_for_ready && client->state != CL_CLOSED &&
	    (!client->link || client->link->expect_ready == 0)) {
		client->held_for_ready = false;
		netbuf_resume(&client->nb);
	}
}

void client_unlinked(struct client *client)
{
	if (client->state != CL_ACTIVE)
		return;
	client->request_time = now_usec();
	if (client->lent)	/* back from the standby companion it was lent to (balance.h) */
		pool_lend_client(client, pool_get(client->pool->db, client->pool->user));
	client_set_state(client, CL_IDLE);	/* to the tail: the idle list stays in idle-since order */
	if (client->notify)	/* notifications held during its transaction go out now */
		relay_call_if(notify_client_idle, client);
	instance_client_at_boundary();
}

/* ---------------------------------------------------------------- events */

static bool client_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	struct client *client = container_of(nb, struct client, nb);

	switch (ev) {
	case NETBUF_EV_PACKET:
		if (in_login(client->state))
			return client_login_packet(client, pkt);
		return client_data_packet(client, pkt);
	case NETBUF_EV_BAD_PACKET:
		/* A startup packet over PostgreSQL's 10,000 bytes gets PostgreSQL's words. */
		client_close(client, "08P01", client->nb.startup ? "invalid length of startup packet" :
			     client->state == CL_LOGIN ? "bad packet header in startup" : "bad packet header");
		return false;
	case NETBUF_EV_RECV_FAILED:
		client_close(client, NULL, client->logged_in ? "client unexpected eof" : "client closed during login");
		return false;
	case NETBUF_EV_SEND_FAILED:
		client_close(client, NULL, "client send failed");
		return false;
	case NETBUF_EV_TLS_READY:
		client_tls_ready(client);
		return client->state != CL_CLOSED;
	case NETBUF_EV_TLS_FAILED:
		client_log(LOG_LEVEL_WARNING, client, "TLS handshake error: %s", netbuf_tls_error());	/* PgBouncer's words */
		client_close(client, NULL, "TLS handshake failed");
		return false;
	case NETBUF_EV_DIRECT_TLS:
		client->direct_tls = true;
		if (!tls_client_side_ready() || netbuf_start_tls(&client->nb, tls_new_client_ssl(), true) < 0) {
			client_close(client, NULL, "direct TLS connection, but TLS is not configured");
			return false;
		}
		return true;
	case NETBUF_EV_CONNECT_OK:
	case NETBUF_EV_CONNECT_FAILED:
	case NETBUF_EV_DRAINED:
		break;
	}
	return true;
}

/* ---------------------------------------------------------------- cancel */

bool client_handle_cancel(struct client *requester, const struct cancel_request *req)
{
	uint32_t key;
	struct client *target = NULL;
	/* A 3.2 client's key must match in full, a 3.0 client's is 4 bytes. */
	if (cancel_key_local(req, &key)) {
		target = cancel_index_find(req->pid, key);
		if (target && target->cancel_long != (req->key_len != CANCEL_KEY_SHORT_LEN))
			target = NULL;
	}
	if (!target)	/* maybe another process's client */
		return pgv.hooks.forward_cancel && pgv.hooks.forward_cancel(requester, req);
	const struct client_kind_ops *ops = client_kinds[target->kind];
	if (ops && ops->cancel) {
		ops->cancel(target);
		return false;
	}
	if (!target->link) {
		client_log(LOG_LEVEL_DEBUG, target, "cancel request while not running a query, ignored");
		return false;
	}
	return server_send_cancel(target->link, requester);
}
