/*
 * dns.c - host name lookups with c-ares, driven by the libevent loop, and
 * the cache behind dns_max_ttl, dns_nxdomain_ttl and dns_zone_check_period
 * (contract in dns.h).
 *
 * c-ares tells us through its socket state callback which sockets to
 * watch; each gets a libevent event, and one timer covers c-ares'
 * retransmission timeouts. Nothing here blocks: the only file read is
 * resolv_conf, once at start-up.
 *
 * Cache: one struct dns_host per name, holding the last answer (addresses
 * or an error) and its expiry, plus the waiters of a lookup in flight. A
 * lookup of an expired name waits for the new answer rather than using the
 * stale one, so dns_max_ttl bounds how long an old address is used for new
 * connections.
 *
 * Owns: the channel, socket events, timer, hosts and zones. Calls out
 * only through waiter callbacks and the change hook.
 */
#include "common.h"
#include "dns.h"
#include "config.h"
#include "log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>
#include <sys/stat.h>
#include <ares.h>
#include <arpa/nameser.h>

/* A name not looked up for this long after its answer expired is forgotten. */
#define DNS_FORGET_AFTER (3600 * USEC_PER_SEC)
#define DNS_ERROR_MAX 256

enum dns_answer {
	DNS_ANSWER_NONE,	/* never answered yet */
	DNS_ANSWER_ADDRS,	/* addrs valid */
	DNS_ANSWER_ERROR,	/* error valid */
};

struct dns_zone {
	struct list_node node;		/* dns.zones */
	char *name;
	uint32_t serial;
	bool serial_known;
	bool query_in_flight;
	bool forgotten;			/* freed once its SOA query returns */
	int count;			/* hosts in it */
};

struct dns_host {
	struct list_node node;		/* dns.hosts */
	char *name;
	struct dns_zone *zone;		/* NULL for a name without a dot */
	enum dns_answer answer;
	bool query_in_flight;
	bool forgotten;			/* freed once its query returns */
	bool changed;			/* the change hook is owed a call */
	struct dns_addr *addrs;
	int naddrs;
	unsigned next;			/* round robin over addrs */
	char error[DNS_ERROR_MAX];
	usec_t expires;
	usec_t last_used;
	struct list waiters;
};

struct dns_sock {
	struct list_node node;		/* dns.socks */
	ares_socket_t fd;
	struct event *ev;
};

static struct {
	bool ready;
	struct event_base *base;
	ares_channel channel;
	struct event *timer;
	struct event *notify;		/* runs the change hook outside any caller's stack */
	struct list socks;
	struct list hosts;
	struct list zones;
	dns_change_fn on_change;
	usec_t max_ttl;
	usec_t nxdomain_ttl;
	usec_t zone_check_period;
	usec_t last_zone_check;
	int queries;
} dns;

/* ---------------------------------------------------------------- loop glue */

static void dns_arm_timer(void)
{
	struct timeval tv, *tvp = ares_timeout(dns.channel, NULL, &tv);
	if (tvp)
		evtimer_add(dns.timer, tvp);
	else
		evtimer_del(dns.timer);
}

static void dns_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	ares_process_fd(dns.channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_arm_timer();
}

static void dns_sock_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)arg;
	ares_process_fd(dns.channel, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
			(what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	dns_arm_timer();
}

static void dns_notify_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	list_for_each(pos, &dns.hosts) {
		struct dns_host *h = container_of(pos, struct dns_host, node);
		if (!h->changed)
			continue;
		h->changed = false;
		if (dns.on_change)
			dns.on_change(h->name);
	}
}

/* c-ares: start, change or stop watching fd. Called before c-ares closes a socket. */
static void dns_sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	(void)data;
	struct dns_sock *s = NULL;
	list_for_each(pos, &dns.socks) {
		struct dns_sock *cand = container_of(pos, struct dns_sock, node);
		if (cand->fd == fd) {
			s = cand;
			break;
		}
	}
	if (s && s->ev) {
		event_free(s->ev);	/* libevent allows this inside the event's own callback */
		s->ev = NULL;
	}
	if (!readable && !writable) {
		if (s) {
			list_remove(&dns.socks, &s->node);
			free(s);
		}
		return;
	}
	if (!s) {
		s = xcalloc(1, sizeof(*s));
		s->fd = fd;
		list_append(&dns.socks, &s->node);
	}
	short flags = EV_PERSIST | (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
	s->ev = event_new(dns.base, fd, flags, dns_sock_cb, NULL);
	if (!s->ev || event_add(s->ev, NULL) < 0)
		log_error("DNS: could not watch the resolver's socket %d", (int)fd);
}

/* ---------------------------------------------------------------- resolv_conf */

/* A nameserver value with a port: "1.2.3.4:53" or "[::1]:53". */
static bool nameserver_has_port(const char *v)
{
	if (v[0] == '[')
		return strstr(v, "]:") != NULL;
	const char *colon = strchr(v, ':');
	return colon && !strchr(colon + 1, ':');
}

/*
 * c-ares 1.18 skips nameserver lines with a port; when resolv_conf has
 * any, the whole server list is set from the file here instead.
 */
static int apply_nameserver_ports(const char *path, char *errbuf, size_t errsize)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(errbuf, errsize, "could not read resolv_conf %s: %s", path, strerror(errno));
		return -1;
	}
	char line[512], csv[2048] = "";
	size_t used = 0;
	bool any_port = false;
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (strncmp(p, "nameserver", 10) != 0 || !isspace((unsigned char)p[10]))
			continue;
		p += 10;
		while (isspace((unsigned char)*p))
			p++;
		size_t n = strcspn(p, " \t\r\n#;");
		if (n == 0)
			continue;
		p[n] = '\0';
		if (nameserver_has_port(p))
			any_port = true;
		int w = snprintf(csv + used, sizeof(csv) - used, "%s%s", used ? "," : "", p);
		if (w < 0 || (size_t)w >= sizeof(csv) - used)
			break;
		used += (size_t)w;
	}
	fclose(f);
	if (!any_port)
		return 0;
	int rc = ares_set_servers_ports_csv(dns.channel, csv);
	if (rc != ARES_SUCCESS) {
		snprintf(errbuf, errsize, "resolv_conf %s: bad nameserver list \"%s\": %s", path, csv, ares_strerror(rc));
		return -1;
	}
	log_info("DNS: nameservers from %s: %s", path, csv);
	return 0;
}

/* ---------------------------------------------------------------- setup */

void dns_configure(const struct config *cfg)
{
	dns.max_ttl = cfg->dns_max_ttl;
	dns.nxdomain_ttl = cfg->dns_nxdomain_ttl;
	dns.zone_check_period = cfg->dns_zone_check_period;
}

int dns_init(struct event_base *base, const struct config *cfg, dns_change_fn on_change, char *errbuf,
	     size_t errsize)
{
	int rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		snprintf(errbuf, errsize, "c-ares initialization failed: %s", ares_strerror(rc));
		return -1;
	}
	memset(&dns, 0, sizeof(dns));
	dns.base = base;
	dns.on_change = on_change;
	list_init(&dns.socks);
	list_init(&dns.hosts);
	list_init(&dns.zones);
	dns_configure(cfg);

	struct ares_options opts;
	memset(&opts, 0, sizeof(opts));
	int mask = ARES_OPT_SOCK_STATE_CB;
	opts.sock_state_cb = dns_sock_state_cb;
	const char *resolv_conf = cfg->resolv_conf;
	if (resolv_conf && resolv_conf[0]) {
		/* c-ares would quietly fall back to defaults for a missing file: say so instead. */
		FILE *f = fopen(resolv_conf, "r");
		if (!f) {
			snprintf(errbuf, errsize, "could not read resolv_conf %s: %s", resolv_conf, strerror(errno));
			ares_library_cleanup();
			return -1;
		}
		fclose(f);
		opts.resolvconf_path = (char *)resolv_conf;
		mask |= ARES_OPT_RESOLVCONF;
	}
	rc = ares_init_options(&dns.channel, &opts, mask);
	if (rc != ARES_SUCCESS) {
		snprintf(errbuf, errsize, "could not set up the DNS resolver: %s", ares_strerror(rc));
		ares_library_cleanup();
		return -1;
	}
	if (resolv_conf && resolv_conf[0] && apply_nameserver_ports(resolv_conf, errbuf, errsize) < 0) {
		ares_destroy(dns.channel);
		ares_library_cleanup();
		return -1;
	}
	dns.timer = evtimer_new(base, dns_timer_cb, NULL);
	dns.notify = event_new(base, -1, 0, dns_notify_cb, NULL);
	dns.ready = true;
	return 0;
}

static void host_free(struct dns_host *h)
{
	free(h->name);
	free(h->addrs);
	free(h);
}

void dns_shutdown(void)
{
	if (!dns.ready)
		return;
	dns.ready = false;	/* callbacks run by ares_destroy (ARES_EDESTRUCTION) only free */
	ares_destroy(dns.channel);
	struct list_node *n;
	while ((n = list_first(&dns.socks))) {
		struct dns_sock *s = container_of(n, struct dns_sock, node);
		list_remove(&dns.socks, n);
		if (s->ev)
			event_free(s->ev);
		free(s);
	}
	while ((n = list_first(&dns.hosts))) {
		struct dns_host *h = container_of(n, struct dns_host, node);
		list_remove(&dns.hosts, n);
		/* Whoever still waits is told nothing: their owners are being freed too. */
		struct list_node *w;
		while ((w = list_first(&h->waiters))) {
			list_remove(&h->waiters, w);
			container_of(w, struct dns_waiter, node)->host = NULL;
		}
		host_free(h);
	}
	while ((n = list_first(&dns.zones))) {
		struct dns_zone *z = container_of(n, struct dns_zone, node);
		list_remove(&dns.zones, n);
		free(z->name);
		free(z);
	}
	if (dns.timer)
		event_free(dns.timer);
	dns.timer = NULL;
	if (dns.notify)
		event_free(dns.notify);
	dns.notify = NULL;
	ares_library_cleanup();
}

/* ---------------------------------------------------------------- zones */

static struct dns_zone *zone_get(const char *host_name)
{
	const char *dot = strchr(host_name, '.');
	if (!dot || !dot[1])
		return NULL;
	const char *name = dot + 1;
	list_for_each(pos, &dns.zones) {
		struct dns_zone *z = container_of(pos, struct dns_zone, node);
		if (strcasecmp(z->name, name) == 0 && !z->forgotten)
			return z;
	}
	struct dns_zone *z = xcalloc(1, sizeof(*z));
	z->name = xstrdup(name);
	list_append(&dns.zones, &z->node);
	return z;
}

static void zone_release(struct dns_zone *z)
{
	if (!z || --z->count > 0)
		return;
	if (z->query_in_flight) {
		z->forgotten = true;	/* its SOA callback frees it */
		return;
	}
	list_remove(&dns.zones, &z->node);
	free(z->name);
	free(z);
}

static void host_start_query(struct dns_host *h);

static void zone_soa_cb(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	(void)timeouts;
	struct dns_zone *z = arg;
	z->query_in_flight = false;
	if (z->forgotten) {
		list_remove(&dns.zones, &z->node);
		free(z->name);
		free(z);
		return;
	}
	if (!dns.ready)
		return;	/* ares_destroy at shutdown: dns_shutdown frees the listed zones */
	struct ares_soa_reply *soa = NULL;
	if (status == ARES_SUCCESS)
		status = ares_parse_soa_reply(abuf, alen, &soa);
	if (status != ARES_SUCCESS) {
		log_debug("DNS: SOA lookup of zone %s failed: %s", z->name, ares_strerror(status));
		return;
	}
	uint32_t serial = soa->serial;
	ares_free_data(soa);
	if (z->serial_known && serial == z->serial)
		return;
	bool changed = z->serial_known;
	z->serial = serial;
	z->serial_known = true;
	if (!changed)
		return;
	log_info("DNS: zone %s has a new serial %u: looking up its %d host names again", z->name, serial, z->count);
	list_for_each(pos, &dns.hosts) {
		struct dns_host *h = container_of(pos, struct dns_host, node);
		if (h->zone == z && !h->forgotten)
			host_start_query(h);
	}
}

static void zones_check(void)
{
	list_for_each(pos, &dns.zones) {
		struct dns_zone *z = container_of(pos, struct dns_zone, node);
		if (z->query_in_flight || z->forgotten)
			continue;
		z->query_in_flight = true;
		ares_query(dns.channel, z->name, ns_c_in, ns_t_soa, zone_soa_cb, z);
	}
	dns_arm_timer();
}

/* ---------------------------------------------------------------- hosts */

static struct dns_host *host_find(const char *name)
{
	list_for_each(pos, &dns.hosts) {
		struct dns_host *h = container_of(pos, struct dns_host, node);
		if (strcasecmp(h->name, name) == 0 && !h->forgotten)
			return h;
	}
	return NULL;
}

static bool same_address(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

static bool addr_listed(const struct dns_addr *list, int n, const struct sockaddr *sa)
{
	for (int i = 0; i < n; i++)
		if (same_address(&list[i].u.sa, sa))
			return true;
	return false;
}

/* The address a waiter wants (see dns_waiter.want); the port stays 0. */
static void host_pick(struct dns_host *h, int want, struct dns_addr *out)
{
	unsigned i = want > 0 ? (unsigned)(want - 1) : h->next++;
	i %= (unsigned)h->naddrs;
	*out = h->addrs[i];
	out->count = h->naddrs;
	out->index = (int)i;
}

static void format_addrs(const struct dns_host *h, char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < h->naddrs && used < size; i++) {
		char ip[INET6_ADDRSTRLEN] = "?";
		sockaddr_ip_text(&h->addrs[i].u.sa, ip, sizeof(ip), NULL);
		int w = snprintf(buf + used, size - used, "%s%s", i ? "," : "", ip);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

static void host_answer_addrs(struct dns_host *h, struct ares_addrinfo *res, bool *changed)
{
	int n = 0;
	for (struct ares_addrinfo_node *ai = res->nodes; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
			n++;
	struct dns_addr *addrs = xcalloc((size_t)MAX(n, 1), sizeof(*addrs));
	int k = 0;
	for (struct ares_addrinfo_node *ai = res->nodes; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		size_t len = ai->ai_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
		if (ai->ai_addrlen < len)
			continue;
		memcpy(&addrs[k].u, ai->ai_addr, len);
		addrs[k].len = (socklen_t)len;
		if (ai->ai_family == AF_INET)
			addrs[k].u.in.sin_port = 0;
		else
			addrs[k].u.in6.sin6_port = 0;
		if (!addr_listed(addrs, k, &addrs[k].u.sa))	/* one entry per address, whatever the socket types */
			k++;
	}
	*changed = false;
	if (h->answer == DNS_ANSWER_ADDRS) {
		*changed = k != h->naddrs;
		for (int i = 0; i < k && !*changed; i++)
			if (!addr_listed(h->addrs, h->naddrs, &addrs[i].u.sa))
				*changed = true;
	}
	free(h->addrs);
	h->addrs = addrs;
	h->naddrs = k;
	h->answer = DNS_ANSWER_ADDRS;
	h->expires = now_usec() + dns.max_ttl;
}

static void host_gai_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	(void)timeouts;
	struct dns_host *h = arg;
	if (!dns.ready) {	/* ares_destroy at shutdown: dns_shutdown frees the listed hosts */
		if (res)
			ares_freeaddrinfo(res);
		if (h->forgotten)
			host_free(h);
		return;
	}
	dns.queries--;
	h->query_in_flight = false;
	if (h->forgotten) {
		if (res)
			ares_freeaddrinfo(res);
		host_free(h);
		return;
	}
	bool changed = false;
	char old[512] = "";
	if (status == ARES_SUCCESS && res) {
		format_addrs(h, old, sizeof(old));
		host_answer_addrs(h, res, &changed);
		if (h->naddrs == 0)
			status = ARES_ENODATA;
	}
	if (res)
		ares_freeaddrinfo(res);
	if (status != ARES_SUCCESS) {
		if (status == ARES_ENOTFOUND)
			snprintf(h->error, sizeof(h->error), "could not resolve host name \"%s\": no such host", h->name);
		else
			snprintf(h->error, sizeof(h->error), "could not resolve host name \"%s\": %s", h->name,
				 ares_strerror(status));
		/* Servers already connected stay; only new connections see the failure. */
		h->answer = DNS_ANSWER_ERROR;
		h->expires = now_usec() + dns.nxdomain_ttl;
		log_warning("DNS: %s", h->error);
	} else {
		char now[512];
		format_addrs(h, now, sizeof(now));
		log_debug("DNS: %s is %s", h->name, now);
		if (changed)
			log_info("DNS: %s changed from %s to %s", h->name, old, now);
	}
	if (changed) {
		h->changed = true;
		event_active(dns.notify, 0, 0);
	}
	/*
	 * One at a time from the head: a callback may cancel waiters, or add
	 * some (they start a new query when this answer is already stale, as
	 * with a TTL of 0), so only as many as were queued are served here.
	 */
	struct list_node *n;
	for (size_t left = h->waiters.count; left > 0 && (n = list_first(&h->waiters)); left--) {
		struct dns_waiter *w = container_of(n, struct dns_waiter, node);
		list_remove(&h->waiters, n);
		w->host = NULL;
		if (h->answer == DNS_ANSWER_ADDRS) {
			struct dns_addr a;
			host_pick(h, w->want, &a);
			w->done(w, &a, NULL);
		} else {
			w->done(w, NULL, h->error);
		}
	}
}

static void host_start_query(struct dns_host *h)
{
	if (h->query_in_flight)
		return;
	h->query_in_flight = true;
	dns.queries++;
	struct ares_addrinfo_hints hints;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	/* Answers from /etc/hosts call host_gai_cb before this returns. */
	ares_getaddrinfo(dns.channel, h->name, NULL, &hints, host_gai_cb, h);
	dns_arm_timer();
}

enum dns_status dns_lookup(const char *name, struct dns_waiter *w, dns_done_fn done, struct dns_addr *addr,
			   char *errbuf, size_t errsize)
{
	usec_t now = now_usec();
	struct dns_host *h = host_find(name);
	if (!h) {
		h = xcalloc(1, sizeof(*h));
		h->name = xstrdup(name);
		list_init(&h->waiters);
		h->zone = zone_get(name);
		if (h->zone)
			h->zone->count++;
		list_append(&dns.hosts, &h->node);
	}
	h->last_used = now;
	dns_cancel(w);
	if (h->answer == DNS_ANSWER_NONE || now >= h->expires) {
		host_start_query(h);
		if (h->query_in_flight) {
			w->done = done;
			w->host = h;
			list_append(&h->waiters, &w->node);
			return DNS_PENDING;
		}
		/* answered inside ares_getaddrinfo: used even if dns_max_ttl is 0 */
	}
	if (h->answer == DNS_ANSWER_ADDRS) {
		host_pick(h, w->want, addr);
		return DNS_DONE;
	}
	snprintf(errbuf, errsize, "%s", h->error);
	return DNS_FAILED;
}

void dns_cancel(struct dns_waiter *w)
{
	if (!w->host)
		return;
	list_remove(&w->host->waiters, &w->node);
	w->host = NULL;
}

bool dns_has_address(const char *name, const struct sockaddr *sa)
{
	struct dns_host *h = host_find(name);
	return h && h->answer == DNS_ANSWER_ADDRS && addr_listed(h->addrs, h->naddrs, sa);
}

/* ---------------------------------------------------------------- periodic */

void dns_housekeeping(usec_t now)
{
	if (!dns.ready)
		return;
	list_for_each_safe(pos, tmp, &dns.hosts) {
		struct dns_host *h = container_of(pos, struct dns_host, node);
		if (h->forgotten || h->waiters.count || now - h->last_used < DNS_FORGET_AFTER || now < h->expires)
			continue;
		list_remove(&dns.hosts, &h->node);
		zone_release(h->zone);
		h->zone = NULL;
		if (h->query_in_flight)
			h->forgotten = true;	/* host_gai_cb frees it */
		else
			host_free(h);
	}
	if (dns.zone_check_period > 0 && now - dns.last_zone_check >= dns.zone_check_period) {
		dns.last_zone_check = now;
		zones_check();
	}
}

/* ---------------------------------------------------------------- admin */

void dns_get_stats(struct dns_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!dns.ready)
		return;
	st->names = (int)dns.hosts.count;
	st->zones = (int)dns.zones.count;
	st->queries = dns.queries;
	list_for_each(pos, &dns.hosts)
		st->pending += (int)container_of(pos, struct dns_host, node)->waiters.count;
}

void dns_walk_hosts(void (*fn)(void *arg, const char *name, long long ttl, const char *addrs), void *arg)
{
	if (!dns.ready)
		return;
	usec_t now = now_usec();
	list_for_each(pos, &dns.hosts) {
		struct dns_host *h = container_of(pos, struct dns_host, node);
		char addrs[1024] = "";
		if (h->answer == DNS_ANSWER_ADDRS)
			format_addrs(h, addrs, sizeof(addrs));
		usec_t left = h->answer == DNS_ANSWER_NONE ? 0 : h->expires - now;
		fn(arg, h->name, left > 0 ? (long long)((left + USEC_PER_SEC - 1) / USEC_PER_SEC) : 0, addrs);
	}
}

void dns_walk_zones(void (*fn)(void *arg, const char *zone, long long serial, int count), void *arg)
{
	if (!dns.ready)
		return;
	list_for_each(pos, &dns.zones) {
		struct dns_zone *z = container_of(pos, struct dns_zone, node);
		if (!z->forgotten)
			fn(arg, z->name, z->serial_known ? (long long)z->serial : 0, z->count);
	}
}

/* ---------------------------------------------------------------- literal addresses */

int dns_literal_address(const char *host, int port, union pgv_sockaddr *out, socklen_t *len,
			char *err, size_t errsize)
{
	memset(out, 0, sizeof(*out));
	if (host[0] == '\0' || host[0] == '/' || host[0] == '@') {
		const char *dir = host;
		struct stat st;
		if (!host[0])
			dir = stat("/var/run/postgresql", &st) == 0 ? "/var/run/postgresql" : "/tmp";
		int n = snprintf(out->un.sun_path, sizeof(out->un.sun_path), "%s/.s.PGSQL.%d", dir, port);
		if (n < 0 || (size_t)n >= sizeof(out->un.sun_path)) {
			snprintf(err, errsize, "unix socket path too long: %s", dir);
			return -1;
		}
		out->un.sun_family = AF_UNIX;
		if (host[0] == '@') {
			out->un.sun_path[0] = '\0';	/* abstract namespace: the name has no trailing NUL */
			*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n);
		} else {
			*len = (socklen_t)sizeof(out->un);
		}
		return 1;
	}
	if (inet_pton(AF_INET, host, &out->in.sin_addr) == 1) {
		out->in.sin_family = AF_INET;
		out->in.sin_port = htons((uint16_t)port);
		*len = sizeof(out->in);
		return 1;
	}
	if (inet_pton(AF_INET6, host, &out->in6.sin6_addr) == 1) {
		out->in6.sin6_family = AF_INET6;
		out->in6.sin6_port = htons((uint16_t)port);
		*len = sizeof(out->in6);
		return 1;
	}
	return 0;
}

void dns_answer_address(const struct dns_addr *a, int port, union pgv_sockaddr *out, socklen_t *len)
{
	memset(out, 0, sizeof(*out));
	memcpy(out, &a->u, a->len);
	*len = a->len;
	if (out->sa.sa_family == AF_INET)
		out->in.sin_port = htons((uint16_t)port);
	else
		out->in6.sin6_port = htons((uint16_t)port);
}
