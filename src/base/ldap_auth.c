/*
 * ldap_auth.c - LDAP password checks on the event loop (ldap_auth.h has
 * the contract).
 *
 * One check is one LDAP connection, as in PostgreSQL: search+bind binds as
 * ldapbinddn (or anonymously), searches ldapbasedn for exactly one entry,
 * then binds again on the same connection as that entry with the user's
 * password; simple bind binds as ldapprefix + user + ldapsuffix at once.
 * Each step is one asynchronous request whose answer is read when its
 * socket is readable. Owns nothing outside this file; never touches a
 * client.
 */
#include "common.h"
#include "ldap_auth.h"
#include "config.h"
#include "instance.h"
#include "list.h"
#include "log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>

#include <openssl/crypto.h>

#define LDAP_OPTS_MAX 2048		/* the option string, and the copies of its values */

struct ldap_opts {
	char buf[LDAP_OPTS_MAX];
	size_t used;
	const char *server, *scheme, *basedn, *binddn, *bindpasswd, *searchattribute, *searchfilter;
	const char *prefix, *suffix;
	int port;
	int scope;			/* from ldapurl; subtree otherwise */
	bool tls;
};

/* One name=value from *p (blanks and commas between pairs); false at the end or on a malformed pair. */
static bool next_pair(const char **p, char *key, size_t ksize, char *val, size_t vsize, bool *bad)
{
	const char *s = *p;
	size_t k = 0, v = 0;

	while (*s && (isspace((unsigned char)*s) || *s == ','))
		s++;
	if (!*s)
		return false;
	while (*s && *s != '=' && !isspace((unsigned char)*s) && k + 1 < ksize)
		key[k++] = *s++;
	key[k] = '\0';
	if (*s != '=' || k == 0 || isspace((unsigned char)s[1]) || !s[1]) {
		*bad = true;
		return false;
	}
	s++;
	if (*s == '"') {
		for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
			if (*s == '"')
				s++;	/* "" is one quote */
			if (v + 1 < vsize)
				val[v++] = *s;
		}
		if (*s != '"') {
			*bad = true;
			return false;
		}
		s++;
	} else {
		while (*s && !isspace((unsigned char)*s) && *s != ',')
			if (v + 1 < vsize)
				val[v++] = *s++;
			else
				s++;
	}
	val[v] = '\0';
	*p = s;
	return true;
}

void ldap_auth_mask_options(const char *options, char *out, size_t size)
{
	const char *p = options, *start;
	char key[64], val[LDAP_OPTS_MAX];
	bool bad = false;
	size_t len = 0;

	out[0] = '\0';
	for (start = p; next_pair(&p, key, sizeof(key), val, sizeof(val), &bad); start = p) {
		bool secret = strcmp(key, "ldapbindpasswd") == 0;
		while (*start && (isspace((unsigned char)*start) || *start == ','))
			start++;
		int n = secret ? snprintf(out + len, size - len, "%s%s=********", len ? " " : "", key) :
			snprintf(out + len, size - len, "%s%.*s", len ? " " : "", (int)(p - start), start);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
	if (bad && len + 4 < size)
		strlcpy_s(out + len, len ? " ..." : "...", size - len);	/* never echo what could not be read */
}

#ifdef HAVE_LDAP

#define LDAP_DEPRECATED 0
#include <ldap.h>

bool ldap_auth_built(void)
{
	return true;
}

static const char *opts_keep(struct ldap_opts *o, const char *value)
{
	size_t n = strlen(value) + 1;
	if (o->used + n > sizeof(o->buf))
		return NULL;
	char *dst = o->buf + o->used;
	memcpy(dst, value, n);
	o->used += n;
	return dst;
}

static bool url_into_opts(struct ldap_opts *o, const char *url, char *why, size_t size)
{
	LDAPURLDesc *u = NULL;
	int rc = ldap_url_parse(url, &u);
	if (rc != LDAP_URL_SUCCESS) {
		snprintf(why, size, "could not parse ldapurl (error %d)", rc);
		return false;
	}
	bool ok = strcmp(u->lud_scheme, "ldap") == 0 || strcmp(u->lud_scheme, "ldaps") == 0;
	if (!ok)
		snprintf(why, size, "unsupported LDAP URL scheme \"%s\"", u->lud_scheme);
	if (ok && u->lud_host && u->lud_host[0])
		ok = (o->server = opts_keep(o, u->lud_host)) != NULL;
	if (ok)
		ok = (o->scheme = opts_keep(o, u->lud_scheme)) != NULL;
	if (ok && u->lud_dn)
		ok = (o->basedn = opts_keep(o, u->lud_dn)) != NULL;
	if (ok && u->lud_attrs && u->lud_attrs[0])
		ok = (o->searchattribute = opts_keep(o, u->lud_attrs[0])) != NULL;
	if (ok && u->lud_filter)
		ok = (o->searchfilter = opts_keep(o, u->lud_filter)) != NULL;
	if (u->lud_port)
		o->port = u->lud_port;
	o->scope = u->lud_scope;
	ldap_free_urldesc(u);
	if (!ok && !why[0])
		snprintf(why, size, "LDAP options too long");
	return ok;
}

/* One option into o; false with why filled. */
static bool opt_set(struct ldap_opts *o, const char *key, const char *val, char *why, size_t size)
{
	static const struct { const char *name; size_t off; } strs[] = {
		{ "ldapserver", offsetof(struct ldap_opts, server) },
		{ "ldapbasedn", offsetof(struct ldap_opts, basedn) },
		{ "ldapbinddn", offsetof(struct ldap_opts, binddn) },
		{ "ldapbindpasswd", offsetof(struct ldap_opts, bindpasswd) },
		{ "ldapsearchattribute", offsetof(struct ldap_opts, searchattribute) },
		{ "ldapsearchfilter", offsetof(struct ldap_opts, searchfilter) },
		{ "ldapprefix", offsetof(struct ldap_opts, prefix) },
		{ "ldapsuffix", offsetof(struct ldap_opts, suffix) },
	};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		if (strcmp(key, strs[i].name) == 0) {
			const char **slot = (const char **)((char *)o + strs[i].off);
			if (!(*slot = opts_keep(o, val)))
				snprintf(why, size, "LDAP options too long");
			return *slot != NULL;
		}
	}
	if (strcmp(key, "ldapport") == 0) {
		char *end;
		long port = strtol(val, &end, 10);
		if (*end || port < 1 || port > 65535) {
			snprintf(why, size, "invalid LDAP port number: \"%.20s\"", val);
			return false;
		}
		o->port = (int)port;
		return true;
	}
	if (strcmp(key, "ldapscheme") == 0) {
		if (strcmp(val, "ldap") != 0 && strcmp(val, "ldaps") != 0) {
			snprintf(why, size, "invalid ldapscheme value: \"%.20s\"", val);
			return false;
		}
		return (o->scheme = opts_keep(o, val)) != NULL;
	}
	if (strcmp(key, "ldaptls") == 0) {
		o->tls = strcmp(val, "1") == 0;
		return true;
	}
	if (strcmp(key, "ldapurl") == 0)
		return url_into_opts(o, val, why, size);
	snprintf(why, size, "invalid LDAP option \"%.40s\"", key);
	return false;
}

/* PostgreSQL's rules on which options go together. */
static bool opts_validate(const struct ldap_opts *o, char *why, size_t size)
{
	if ((o->prefix || o->suffix) &&
	    (o->basedn || o->binddn || o->bindpasswd || o->searchattribute || o->searchfilter)) {
		snprintf(why, size, "cannot use ldapbasedn, ldapbinddn, ldapbindpasswd, ldapsearchattribute, "
			 "ldapsearchfilter, or ldapurl together with ldapprefix");
		return false;
	}
	if (!o->prefix && !o->suffix && !o->basedn) {
		snprintf(why, size, "authentication method \"ldap\" requires argument \"ldapbasedn\", "
			 "\"ldapprefix\", or \"ldapsuffix\" to be set");
		return false;
	}
	if (o->searchattribute && o->searchfilter) {
		snprintf(why, size, "cannot use ldapsearchattribute together with ldapsearchfilter");
		return false;
	}
	if (o->tls && o->scheme && strcmp(o->scheme, "ldaps") == 0) {
		snprintf(why, size, "cannot use ldaptls=1 with ldapscheme=ldaps");
		return false;
	}
	if (!o->server || !o->server[0]) {
		snprintf(why, size, "ldapserver is required (pgvalve does not look up DNS SRV records)");
		return false;
	}
	return true;
}

static bool opts_parse(const char *options, struct ldap_opts *o, char *why, size_t size)
{
	char key[64], val[LDAP_OPTS_MAX];
	const char *p = options;
	bool bad = false;

	memset(o, 0, sizeof(*o));
	o->scope = LDAP_SCOPE_SUBTREE;
	why[0] = '\0';
	while (next_pair(&p, key, sizeof(key), val, sizeof(val), &bad))
		if (!opt_set(o, key, val, why, size))
			return false;
	if (bad) {
		snprintf(why, size, "LDAP options not in name=value form");
		return false;
	}
	if (!o->scheme)
		o->scheme = "ldap";
	if (!o->port)
		o->port = strcmp(o->scheme, "ldaps") == 0 ? LDAPS_PORT : LDAP_PORT;
	return opts_validate(o, why, size);
}

bool ldap_auth_check_options(const char *options, char *why, size_t size)
{
	struct ldap_opts *o = xcalloc(1, sizeof(*o));
	bool ok = opts_parse(options, o, why, size);
	OPENSSL_cleanse(o, sizeof(*o));
	free(o);
	return ok;
}

enum ldap_step {
	STEP_QUEUED,
	STEP_STARTTLS,		/* ldaptls=1: the StartTLS request */
	STEP_SEARCH_BIND,	/* search+bind: as ldapbinddn, or anonymously */
	STEP_SEARCH,
	STEP_USER_BIND,		/* as the user's DN with the user's password */
};

struct ldap_auth_req {
	struct list_node node;		/* queued or active */
	enum ldap_step step;
	bool is_active;			/* on `active` (else `queued`) */
	bool connecting;		/* waiting for the socket to be writable (async connect) */
	struct ldap_opts opts;
	char user[256];
	char *password;
	char dn[1024];
	LDAP *ld;
	int msgid;
	int fd;
	struct event *io;
	struct event *timer;
	ldap_auth_done_fn done;
	void *arg;
	/* A call libldap waits in (lookup, TLS handshake) runs in a thread: the loop leaves the handle alone. */
	bool connected;			/* the first request went out: connect (and ldaps's handshake) done */
	bool in_thread;
	bool orphaned;			/* its check ended while the thread ran: freed when the thread is done */
	enum { THREAD_SEND, THREAD_INSTALL_TLS } thread_op;
	int thread_rc;
	int wake[2];			/* the thread writes a byte when done */
	pthread_t thread;
	struct event *wake_ev;
};

static struct list queued, active;
static struct event *pump_ev;	/* also says the lists are initialized */

static void req_free(struct ldap_auth_req *req)
{
	if (req->in_thread) {
		req->orphaned = true;	/* the thread still uses the handle: on_thread_done frees */
		if (req->timer)
			event_del(req->timer);
		return;
	}
	if (req->wake_ev)
		event_free(req->wake_ev);
	if (req->io)
		event_free(req->io);
	if (req->timer)
		event_free(req->timer);
	if (req->ld)
		ldap_unbind_ext(req->ld, NULL, NULL);	/* the socket is non-blocking: no wait */
	if (req->password) {
		OPENSSL_cleanse(req->password, strlen(req->password));
		free(req->password);
	}
	OPENSSL_cleanse(req, sizeof(*req));
	free(req);
}

static void pump_later(void)
{
	if (pump_ev)
		event_active(pump_ev, EV_TIMEOUT, 0);
}

/* Ends a check: off its list, freed, then its callback. */
static void finish(struct ldap_auth_req *req, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void finish(struct ldap_auth_req *req, bool ok, const char *fmt, ...)
{
	char text[1400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ldap_auth_done_fn done = req->done;
	void *arg = req->arg;
	list_remove(req->is_active ? &active : &queued, &req->node);
	req_free(req);
	pump_later();
	done(arg, ok, text);
}

static const char *ld_error(LDAP *ld, int rc)
{
	int err = rc;
	if (rc == -1 && ld)
		ldap_get_option(ld, LDAP_OPT_RESULT_CODE, &err);
	return ldap_err2string(err);
}

static void on_io(evutil_socket_t fd, short what, void *arg);

/* Watches the LDAP socket: writable while it connects, readable otherwise. */
static bool watch(struct ldap_auth_req *req, bool writable)
{
	int fd = -1;
	if (ldap_get_option(req->ld, LDAP_OPT_DESC, &fd) != LDAP_OPT_SUCCESS || fd < 0)
		return false;
	if (req->io && (fd != req->fd || writable != req->connecting)) {
		event_free(req->io);
		req->io = NULL;
	}
	req->fd = fd;
	req->connecting = writable;
	if (!writable)
		evutil_make_socket_nonblocking(fd);	/* libldap reads a partial answer later */
	if (!req->io)
		req->io = event_new(pgv.base, fd, (writable ? EV_WRITE : EV_READ) | EV_PERSIST, on_io, req);
	return req->io && event_add(req->io, NULL) == 0;	/* again after a TLS thread, which took it off */
}

/* The filter that finds the user's entry: ldapsearchfilter with $username, or (attribute=user). */
static void search_filter(const struct ldap_auth_req *req, char *out, size_t size)
{
	const char *pat = req->opts.searchfilter;
	if (!pat) {
		snprintf(out, size, "(%s=%s)", req->opts.searchattribute ? req->opts.searchattribute : "uid",
			 req->user);
		return;
	}
	size_t n = 0;
	while (*pat && n + 1 < size) {
		if (strncmp(pat, "$username", 9) == 0) {
			n += strlcpy_s(out + n, req->user, size - n);
			n = MIN(n, size - 1);
			pat += 9;
		} else {
			out[n++] = *pat++;
		}
	}
	out[n] = '\0';
}

static int issue_request(struct ldap_auth_req *req);
static void request_sent(struct ldap_auth_req *req, int rc);
static void first_step(struct ldap_auth_req *req);

static void *tls_thread(void *arg)
{
	struct ldap_auth_req *req = arg;
	req->thread_rc = req->thread_op == THREAD_SEND ? issue_request(req) : ldap_install_tls(req->ld);
	ssize_t n = write(req->wake[1], "x", 1);	/* the last touch: the loop joins, then reads thread_rc */
	(void)n;
	return NULL;
}

/* The handshake's thread is done: the check goes on (or, ended meanwhile, is freed). */
static void on_thread_done(evutil_socket_t fd, short what, void *arg)
{
	struct ldap_auth_req *req = arg;
	char c;
	if (read(fd, &c, 1) != 1)
		return;
	pthread_join(req->thread, NULL);
	req->in_thread = false;
	close(req->wake[0]);
	close(req->wake[1]);
	event_free(req->wake_ev);
	req->wake_ev = NULL;
	if (req->orphaned) {
		req_free(req);
		return;
	}
	if (req->thread_op == THREAD_SEND) {
		request_sent(req, req->thread_rc);
		return;
	}
	if (req->thread_rc != LDAP_SUCCESS) {
		finish(req, false, "could not start LDAP TLS session on server \"%s\": %s", req->opts.server,
		       ld_error(req->ld, req->thread_rc));
		return;
	}
	first_step(req);
}

/* Runs a call libldap waits in (a lookup, a TLS handshake) in a thread; its socket stays unwatched. */
static bool run_in_thread(struct ldap_auth_req *req, int op)
{
	if (pipe2(req->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return false;
	req->wake_ev = event_new(pgv.base, req->wake[0], EV_READ | EV_PERSIST, on_thread_done, req);
	if (req->io)
		event_del(req->io);
	req->thread_op = op;
	/* signals stay the loop's: the thread starts with all of them blocked */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = req->wake_ev && event_add(req->wake_ev, NULL) == 0 ?
		pthread_create(&req->thread, NULL, tls_thread, req) : -1;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		if (req->wake_ev)
			event_free(req->wake_ev);
		req->wake_ev = NULL;
		close(req->wake[0]);
		close(req->wake[1]);
		return false;
	}
	req->in_thread = true;
	return true;
}

/* The libldap call of the current step: nothing but the handle and the request (a thread may run it). */
static int issue_request(struct ldap_auth_req *req)
{
	const struct ldap_opts *o = &req->opts;
	struct berval cred;

	switch (req->step) {
	case STEP_STARTTLS:
		return ldap_start_tls(req->ld, NULL, NULL, &req->msgid);
	case STEP_SEARCH_BIND:
		cred.bv_val = (char *)(o->bindpasswd ? o->bindpasswd : "");
		cred.bv_len = strlen(cred.bv_val);
		return ldap_sasl_bind(req->ld, o->binddn ? o->binddn : "", LDAP_SASL_SIMPLE, &cred, NULL, NULL,
				      &req->msgid);
	case STEP_SEARCH: {
		char filter[1024];
		char *attrs[] = { (char *)LDAP_NO_ATTRS, NULL };
		search_filter(req, filter, sizeof(filter));
		return ldap_search_ext(req->ld, o->basedn, o->scope, filter, attrs, 0, NULL, NULL, NULL, 2, &req->msgid);
	}
	default:
		cred.bv_val = req->password;
		cred.bv_len = strlen(req->password);
		return ldap_sasl_bind(req->ld, req->dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, &req->msgid);
	}
}

/* What the request's call said: wait for the connect, for the answer, or fail. */
static void request_sent(struct ldap_auth_req *req, int rc)
{
	const struct ldap_opts *o = &req->opts;
	if (rc == LDAP_X_CONNECTING) {
		if (!watch(req, true))
			finish(req, false, "could not watch the LDAP connection to %s", o->server);
		return;
	}
	if (rc != LDAP_SUCCESS) {
		finish(req, false, "could not talk to LDAP server \"%s\" port %d: %s", o->server, o->port,
		       ld_error(req->ld, rc));
		return;
	}
	req->connected = true;
	if (!watch(req, false))
		finish(req, false, "could not watch the LDAP connection to %s", o->server);
}

/* Whether every host of ldapserver is an IP address (libldap then looks nothing up). */
static bool servers_numeric(const char *servers)
{
	char host[256];
	uint8_t addr[16];
	for (const char *p = servers; *p;) {
		size_t len = strcspn(p, " ");
		if (len >= sizeof(host))
			return false;
		memcpy(host, p, len);
		host[len] = '\0';
		if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
			return false;
		p += len;
		p += strspn(p, " ");
	}
	return true;
}

/*
 * Sends the request of the current step. The first one connects: libldap
 * looks up a host name and shakes ldaps's TLS hands inside that call,
 * waiting for both, so then it runs in a thread.
 */
static void send_step(struct ldap_auth_req *req)
{
	if (!req->connected && (strcmp(req->opts.scheme, "ldaps") == 0 || !servers_numeric(req->opts.server))) {
		/*
		 * In the thread a plain connect may wait too, and must: an
		 * asynchronous one tries only a name's first address, and
		 * "localhost" is ::1 before 127.0.0.1 on Debian, where a
		 * directory may listen on IPv4 alone. Each address gets
		 * LDAP_OPT_NETWORK_TIMEOUT. Not for ldaps: a waiting connect
		 * there also waits out a directory that never answers the
		 * handshake, past the check's own timeout.
		 */
		if (strcmp(req->opts.scheme, "ldaps") != 0)
			ldap_set_option(req->ld, LDAP_OPT_CONNECT_ASYNC, LDAP_OPT_OFF);
		if (!run_in_thread(req, THREAD_SEND))
			finish(req, false, "could not start a thread to connect to %s", req->opts.server);
		return;
	}
	request_sent(req, issue_request(req));
}

/* The first step once connected (again after StartTLS). */
static void first_step(struct ldap_auth_req *req)
{
	if (req->opts.basedn) {
		req->step = STEP_SEARCH_BIND;
	} else {
		snprintf(req->dn, sizeof(req->dn), "%s%s%s", req->opts.prefix ? req->opts.prefix : "", req->user,
			 req->opts.suffix ? req->opts.suffix : "");
		req->step = STEP_USER_BIND;
	}
	send_step(req);
}

/* The one entry the search found becomes the DN to bind as. */
static void search_done(struct ldap_auth_req *req, LDAPMessage *res)
{
	int n = ldap_count_entries(req->ld, res);
	char filter[1024];
	search_filter(req, filter, sizeof(filter));
	if (n != 1) {
		if (n == 0)
			finish(req, false, "LDAP user \"%s\" does not exist: search for filter \"%s\" on server \"%s\" "
			       "returned no entries", req->user, filter, req->opts.server);
		else
			finish(req, false, "LDAP user \"%s\" is not unique: search for filter \"%s\" on server \"%s\" "
			       "returned %s entries", req->user, filter, req->opts.server, n > 1 ? "several" : "no usable");
		return;
	}
	char *dn = ldap_get_dn(req->ld, ldap_first_entry(req->ld, res));
	if (!dn) {
		finish(req, false, "could not get the DN of the entry matching \"%s\" on server \"%s\"", filter,
		       req->opts.server);
		return;
	}
	strlcpy_s(req->dn, dn, sizeof(req->dn));
	ldap_memfree(dn);
	req->step = STEP_USER_BIND;
	send_step(req);
}

/* An answer to the current step's request. */
static void step_done(struct ldap_auth_req *req, LDAPMessage *res)
{
	const struct ldap_opts *o = &req->opts;
	int err = LDAP_OTHER;
	int rc = ldap_parse_result(req->ld, res, &err, NULL, NULL, NULL, NULL, 0);
	if (rc != LDAP_SUCCESS)
		err = rc;
	if (req->step == STEP_SEARCH && (err == LDAP_SUCCESS || err == LDAP_SIZELIMIT_EXCEEDED)) {
		search_done(req, res);
		return;
	}
	if (err != LDAP_SUCCESS) {
		if (req->step == STEP_STARTTLS)
			finish(req, false, "could not start LDAP TLS session on server \"%s\": %s", o->server,
			       ldap_err2string(err));
		else if (req->step == STEP_SEARCH_BIND)
			finish(req, false, "could not perform initial LDAP bind for ldapbinddn \"%s\" on server \"%s\": %s",
			       o->binddn ? o->binddn : "", o->server, ldap_err2string(err));
		else if (req->step == STEP_SEARCH)
			finish(req, false, "could not search LDAP on server \"%s\": %s", o->server, ldap_err2string(err));
		else
			finish(req, false, "LDAP login failed for user \"%s\" on server \"%s\": %s", req->dn, o->server,
			       ldap_err2string(err));
		return;
	}
	switch (req->step) {
	case STEP_STARTTLS:
		/* libldap shakes hands itself and waits for it (LDAP_OPT_NETWORK_TIMEOUT): not on the loop */
		if (!run_in_thread(req, THREAD_INSTALL_TLS))
			finish(req, false, "could not start a thread for the TLS handshake with %s", o->server);
		return;
	case STEP_SEARCH_BIND:
		req->step = STEP_SEARCH;
		send_step(req);
		return;
	default:
		finish(req, true, "%s", req->dn);
		return;
	}
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct ldap_auth_req *req = arg;
	struct timeval zero = { 0, 0 };
	LDAPMessage *res = NULL;

	if (req->connecting) {
		send_step(req);		/* the connect finished one way or the other: try the request again */
		return;
	}
	int rc = ldap_result(req->ld, req->msgid, LDAP_MSG_ALL, &zero, &res);
	if (rc == 0)
		return;		/* not all of it yet */
	if (rc < 0) {
		finish(req, false, "lost the connection to LDAP server \"%s\": %s", req->opts.server,
		       ld_error(req->ld, -1));
		return;
	}
	step_done(req, res);
	ldap_msgfree(res);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ldap_auth_req *req = arg;
	finish(req, false, "no answer from LDAP server \"%s\" within auth_ldap_timeout (%.1f s)%s", req->opts.server,
	       (double)pgv.cfg->auth_ldap_timeout / USEC_PER_SEC,
	       !req->is_active ? ", still waiting for a turn (auth_ldap_max_concurrent)" : "");
}

/* The URIs of ldapserver's hosts ("a b" -> "ldap://a:389 ldap://b:389"). */
static bool server_uris(const struct ldap_opts *o, char *out, size_t size)
{
	const char *p = o->server;
	size_t n = 0;
	while (*p) {
		size_t len = strcspn(p, " ");
		int w = snprintf(out + n, size - n, "%s%s://%.*s:%d", n ? " " : "", o->scheme, (int)len, p, o->port);
		if (w < 0 || (size_t)w >= size - n)
			return false;
		n += (size_t)w;
		p += len;
		while (*p == ' ')
			p++;
	}
	return n > 0;
}

/* A queued check gets its connection and sends its first request. */
static void begin(struct ldap_auth_req *req)
{
	char uris[LDAP_OPTS_MAX * 2];
	int version = LDAP_VERSION3;
	usec_t left = pgv.cfg->auth_ldap_timeout > 0 ? pgv.cfg->auth_ldap_timeout : 10 * USEC_PER_SEC;
	struct timeval tv = { (time_t)(left / USEC_PER_SEC), (suseconds_t)(left % USEC_PER_SEC) };

	list_remove(&queued, &req->node);
	list_append(&active, &req->node);
	req->is_active = true;
	if (!server_uris(&req->opts, uris, sizeof(uris)) || ldap_initialize(&req->ld, uris) != LDAP_SUCCESS) {
		finish(req, false, "could not initialize LDAP for server \"%s\"", req->opts.server);
		return;
	}
	ldap_set_option(req->ld, LDAP_OPT_PROTOCOL_VERSION, &version);
	ldap_set_option(req->ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
	ldap_set_option(req->ld, LDAP_OPT_CONNECT_ASYNC, LDAP_OPT_ON);
	ldap_set_option(req->ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
	if (req->opts.tls) {
		req->step = STEP_STARTTLS;
		send_step(req);
		return;
	}
	first_step(req);
}

static void pump(evutil_socket_t fd, short what, void *arg)
{
	int max = pgv.cfg->auth_ldap_max_concurrent > 0 ? pgv.cfg->auth_ldap_max_concurrent : 1;
	while (!list_empty(&queued) && (int)active.count < max)
		begin(container_of(list_first(&queued), struct ldap_auth_req, node));
}

struct ldap_auth_req *ldap_auth_start(const char *options, const char *user, const char *password,
				      ldap_auth_done_fn done, void *arg, char *why, size_t size)
{
	if (!password[0]) {
		snprintf(why, size, "empty password");	/* an LDAP bind without one would be anonymous */
		return NULL;
	}
	if (strlen(user) >= sizeof(((struct ldap_auth_req *)0)->user)) {
		snprintf(why, size, "user name too long for LDAP authentication");
		return NULL;
	}
	struct ldap_auth_req *req = xcalloc(1, sizeof(*req));
	if (!opts_parse(options, &req->opts, why, size)) {
		req_free(req);
		return NULL;
	}
	/* As PostgreSQL: no character that a search filter would need escaped. */
	if (req->opts.basedn && strpbrk(user, "*()\\/")) {
		snprintf(why, size, "invalid character in user name for LDAP authentication");
		req_free(req);
		return NULL;
	}
	if (!pump_ev) {
		list_init(&queued);
		list_init(&active);
		pump_ev = event_new(pgv.base, -1, 0, pump, NULL);
	}
	struct timeval tv = { (time_t)(pgv.cfg->auth_ldap_timeout / USEC_PER_SEC),
			      (suseconds_t)(pgv.cfg->auth_ldap_timeout % USEC_PER_SEC) };
	req->timer = evtimer_new(pgv.base, on_timeout, req);
	if (!pump_ev || !req->timer || (pgv.cfg->auth_ldap_timeout > 0 && evtimer_add(req->timer, &tv) != 0)) {
		snprintf(why, size, "out of memory");
		req_free(req);
		return NULL;
	}
	strlcpy_s(req->user, user, sizeof(req->user));
	req->password = xstrdup(password);
	req->fd = -1;
	req->done = done;
	req->arg = arg;
	req->step = STEP_QUEUED;
	list_append(&queued, &req->node);
	pump_later();
	return req;
}

void ldap_auth_cancel(struct ldap_auth_req *req)
{
	if (!req)
		return;
	list_remove(req->is_active ? &active : &queued, &req->node);
	req_free(req);
	pump_later();
}

#else /* !HAVE_LDAP */

bool ldap_auth_built(void)
{
	return false;
}

bool ldap_auth_check_options(const char *options, char *why, size_t size)
{
	snprintf(why, size, "LDAP authentication is not supported (pgvalve has no LDAP client)");
	return false;
}

struct ldap_auth_req *ldap_auth_start(const char *options, const char *user, const char *password,
				      ldap_auth_done_fn done, void *arg, char *why, size_t size)
{
	snprintf(why, size, "LDAP authentication is not supported (pgvalve has no LDAP client)");
	return NULL;
}

void ldap_auth_cancel(struct ldap_auth_req *req)
{
}

#endif
