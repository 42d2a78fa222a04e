/*
 * listener.c - listening sockets and the accept loop.
 *
 * Owns the listening file descriptors and their events, nothing else: an
 * accepted socket is configured (non-blocking, keepalive, no Nagle) and
 * handed to client.c at once.
 */
#include "common.h"
#include "listener.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "sdnotify.h"
#include "tcp.h"
#include "workers.h"

#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LISTENERS 16
/*
 * One accept per wake-up: the listening socket is level-triggered, so more
 * pending connections wake the loop again, and the accept() that would
 * only return EAGAIN (one per connection at moderate rates) is saved.
 */
#define ACCEPTS_PER_WAKEUP 1

/* Connections queued in the kernel that a closing TCP listener still takes in. */
#define DRAIN_MAX 4096

struct listener {
	int fd;
	bool is_unix;
	struct event *ev;
	char unix_path[108];		/* Unix socket file, "" for TCP */
	ino_t unix_inode;		/* to remove the socket file only while it is still ours */
};

static struct {
	struct listener list[MAX_LISTENERS];
	int count;
	struct event *resume_timer;	/* after running out of file descriptors */
	struct event *handoff_timer;	/* pending while closing soon (a drain, a so_reuseport hand-off) */
	void (*handoff_done)(void);
} lst;

/*
 * What the TCP listeners are tuned with. Linux copies a listener's
 * TCP_NODELAY, keepalive, buffer and user-timeout settings to the sockets
 * accept() returns, so clients are not tuned one by one (two setsockopt
 * calls saved per connection); a reload retunes the listeners.
 */
static struct tcp_tuning listener_tuning;

void listener_apply_tcp_settings(void)
{
	struct tcp_tuning t;
	tcp_tuning_of(pgv.cfg, &t);
	if (memcmp(&t, &listener_tuning, sizeof(t)) == 0)
		return;
	if (listener_tuning.socket_buffer > 0 && t.socket_buffer == 0)
		log_warning("tcp_socket_buffer = 0: new clients keep the previous buffer size until a restart");
	for (int i = 0; i < lst.count; i++)
		if (!lst.list[i].is_unix)
			tcp_apply(lst.list[i].fd, &t, true);
	listener_tuning = t;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	if (pgv.shutting_down)
		return;
	for (int i = 0; i < lst.count; i++)
		event_add(lst.list[i].ev, NULL);
}

/* Accepts up to max connections; false once the queue is empty or accepting failed. */
static bool accept_some(struct listener *l, int max)
{
	int fd = l->fd;
	for (int i = 0; i < max; i++) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof(addr);
		int cfd = accept4(fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
				return false;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				log_error("accept() failed: %s; not accepting for 1 s", strerror(errno));
				for (int j = 0; j < lst.count; j++)
					event_del(lst.list[j].ev);
				struct timeval tv = { 1, 0 };
				event_add(lst.resume_timer, &tv);
				return false;
			}
			log_error("accept() failed: %s", strerror(errno));
			return false;
		}
		client_accept(cfd, (struct sockaddr *)&addr, len, l->is_unix);
	}
	return true;
}

static void accept_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what;
	accept_some(arg, ACCEPTS_PER_WAKEUP);
}

static struct listener *add_listener(int fd, bool is_unix)
{
	if (lst.count >= MAX_LISTENERS) {
		close(fd);
		log_error("too many listening sockets");
		return NULL;
	}
	struct listener *l = &lst.list[lst.count++];
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	l->is_unix = is_unix;
	l->ev = event_new(pgv.base, fd, EV_READ | EV_PERSIST, accept_cb, l);
	event_priority_set(l->ev, NETBUF_PRIORITY_LOGIN);	/* new clients after established traffic (netbuf.h) */
	event_add(l->ev, NULL);
	return l;
}

/* TCP_DEFER_ACCEPT and the tcp_* settings on a TCP listener, opened here or inherited. */
static void tune_tcp_listener(int fd)
{
	const struct config *cfg = pgv.cfg;
	if (cfg->tcp_defer_accept) {
		/* Wake up only once the client has sent its first bytes (seconds to wait for them). */
		int secs = cfg->tcp_defer_accept;
		setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
	}
	tcp_tuning_of(cfg, &listener_tuning);
	tcp_apply(fd, &listener_tuning, false);	/* accepted clients copy these */
}

static int listen_tcp(const struct sockaddr *sa, socklen_t salen, const char *what)
{
	const struct config *cfg = pgv.cfg;
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("socket() for %s failed: %s", what, strerror(errno));
		return -1;
	}
	int on = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (cfg->so_reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0)
		log_warning("so_reuseport: %s", strerror(errno));
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	tune_tcp_listener(fd);
	if (bind(fd, sa, salen) < 0) {
		log_error("could not bind %s: %s", what, strerror(errno));
		close(fd);
		return -1;
	}
	if (listen(fd, cfg->listen_backlog > 0 ? cfg->listen_backlog : 4096) < 0) {
		log_error("listen() on %s failed: %s", what, strerror(errno));
		close(fd);
		return -1;
	}
	log_info("listening on %s", what);
	return add_listener(fd, false) ? 0 : -1;
}

static int listen_address(const char *host, int port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res = NULL;
	char portstr[16], what[300];
	snprintf(portstr, sizeof(portstr), "%d", port);
	bool any = strcmp(host, "*") == 0;
	int rc = getaddrinfo(any ? NULL : host, portstr, &hints, &res);
	if (rc != 0) {
		log_error("listen_addr \"%s\": %s", host, gai_strerror(rc));
		return -1;
	}
	int opened = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		char addrtxt[INET6_ADDRSTRLEN + 2] = "?";
		getnameinfo(ai->ai_addr, ai->ai_addrlen, addrtxt, sizeof(addrtxt), NULL, 0, NI_NUMERICHOST);
		snprintf(what, sizeof(what), "%s:%d", addrtxt, port);
		if (listen_tcp(ai->ai_addr, ai->ai_addrlen, what) < 0) {
			freeaddrinfo(res);
			return -1;
		}
		opened++;
	}
	freeaddrinfo(res);
	return opened ? 0 : -1;
}

/* unix_socket_group: the socket file's group, so its members may connect (with unix_socket_mode). */
static bool set_socket_group(const char *path, const char *group)
{
	errno = 0;
	struct group *gr = getgrnam(group);
	if (!gr) {
		log_error("unix_socket_group: no group \"%s\"%s%s", group, errno ? ": " : "", errno ? strerror(errno) : "");
		return false;
	}
	if (chown(path, (uid_t)-1, gr->gr_gid) < 0) {
		log_error("unix_socket_group: could not give %s to group %s: %s", path, group, strerror(errno));
		return false;
	}
	return true;
}

static int listen_unix(const char *dir, int port)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int n = snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/.s.PGSQL.%d", dir, port);
	if (n < 0 || (size_t)n >= sizeof(sun.sun_path)) {
		log_error("unix_socket_dir \"%s\" is too long", dir);
		return -1;
	}
	/* A socket file left by a dead process is removed; a live one means another pooler owns the port. */
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		if (connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
			close(probe);
			log_error("unix socket %s is in use by another process", sun.sun_path);
			return -1;
		}
		close(probe);
	}
	unlink(sun.sun_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		log_error("could not bind unix socket %s: %s", sun.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	chmod(sun.sun_path, (mode_t)pgv.cfg->unix_socket_mode);
	if (pgv.cfg->unix_socket_group[0] && !set_socket_group(sun.sun_path, pgv.cfg->unix_socket_group)) {
		close(fd);
		unlink(sun.sun_path);
		return -1;
	}
	if (listen(fd, pgv.cfg->listen_backlog > 0 ? pgv.cfg->listen_backlog : 4096) < 0) {
		log_error("listen() on %s failed: %s", sun.sun_path, strerror(errno));
		close(fd);
		unlink(sun.sun_path);
		return -1;
	}
	struct listener *l = add_listener(fd, true);
	if (!l) {
		unlink(sun.sun_path);
		return -1;
	}
	strlcpy_s(l->unix_path, sun.sun_path, sizeof(l->unix_path));
	struct stat st;
	l->unix_inode = stat(sun.sun_path, &st) == 0 ? st.st_ino : 0;
	log_info("listening on %s", sun.sun_path);
	return 0;
}

/*
 * Socket activation (a pgvalve.socket unit): the sockets systemd opened
 * replace listen_addr, listen_port and unix_socket_dir, as in PgBouncer.
 * Each must be a listening stream socket; the files of inherited Unix
 * sockets belong to systemd and are never removed here.
 */
static int adopt_inherited(int first, int count)
{
	for (int fd = first; fd < first + count; fd++) {
		int type = 0, listening = 0, domain = 0;
		socklen_t len = sizeof(int);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
		    (len = sizeof(int), getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) < 0 ||
		    !listening || (len = sizeof(int), getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len)) < 0) {
			log_error("socket activation: file descriptor %d is not a listening stream socket", fd);
			return -1;
		}
		int flags = fcntl(fd, F_GETFL);
		if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
			log_error("socket activation: file descriptor %d: %s", fd, strerror(errno));
			return -1;
		}
		bool is_unix = domain == AF_UNIX;
		if (!is_unix)
			tune_tcp_listener(fd);
		if (!add_listener(fd, is_unix))
			return -1;
		log_info("listening on file descriptor %d from systemd (%s)", fd, is_unix ? "unix" : "tcp");
	}
	return 0;
}

int listener_start(void)
{
	const struct config *cfg = pgv.cfg;
	lst.resume_timer = evtimer_new(pgv.base, resume_cb, NULL);

	int first, inherited = sdnotify_listen_fds(&first);
	if (inherited > 0) {
		if (cfg->listen_addr[0])
			log_warning("sockets passed by systemd: listen_addr is ignored");
		if (cfg->unix_socket_dir[0] && workers_owns_unix_socket())
			log_warning("sockets passed by systemd: unix_socket_dir is ignored");
		if (adopt_inherited(first, inherited) < 0)
			return -1;
	} else {
		const char *p = cfg->listen_addr;
		char host[256];
		while (list_next_item(&p, host, sizeof(host))) {
			if (listen_address(host, cfg->listen_port) < 0)
				return -1;
		}
		if (cfg->unix_socket_dir[0] && workers_owns_unix_socket() &&
		    listen_unix(cfg->unix_socket_dir, cfg->listen_port) < 0)
			return -1;
	}
	/* A worker's private socket is how its siblings forward cancels: it stays under socket activation. */
	char private_dir[256];
	workers_socket_dir(cfg, workers_self(), private_dir, sizeof(private_dir));
	if (private_dir[0] && listen_unix(private_dir, cfg->listen_port) < 0)
		return -1;
	if (lst.count == 0) {
		log_error("nothing to listen on: set listen_addr or unix_socket_dir");
		return -1;
	}
	return 0;
}

void listener_close_tcp(void)
{
	int kept = 0;
	for (int i = 0; i < lst.count; i++) {
		if (lst.list[i].is_unix) {
			lst.list[kept++] = lst.list[i];
			continue;
		}
		/*
		 * With so_reuseport the kernel resets what is still queued on a
		 * socket that closes: take it in first (a rolling restart must
		 * not fail the clients that came just before).
		 */
		accept_some(&lst.list[i], DRAIN_MAX);
		event_free(lst.list[i].ev);
		close(lst.list[i].fd);
	}
	lst.count = kept;
	/* events point at their struct listener: re-assign after the move */
	for (int i = 0; i < lst.count; i++) {
		event_free(lst.list[i].ev);
		lst.list[i].ev = event_new(pgv.base, lst.list[i].fd, EV_READ | EV_PERSIST, accept_cb, &lst.list[i]);
		event_add(lst.list[i].ev, NULL);
	}
}

static void handoff_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	event_free(lst.handoff_timer);
	lst.handoff_timer = NULL;
	listener_close_tcp();
	log_info("the TCP listeners are closed");
	if (lst.handoff_done)
		lst.handoff_done();
}

/*
 * Stops TCP_DEFER_ACCEPT on the TCP listeners and closes them after
 * LISTENER_CLOSE_LINGER_USEC, accepting meanwhile; false (nothing done)
 * when there is no TCP listener or a closing is under way already.
 */
static bool close_tcp_soon(void (*closed)(void))
{
	int tcp = 0, off = 0;
	if (lst.handoff_timer)
		return false;
	for (int i = 0; i < lst.count; i++) {
		if (lst.list[i].is_unix)
			continue;
		/*
		 * A deferred connection sits in the kernel until its first bytes
		 * and is reset when the listener closes: from now on each goes
		 * straight to the accept queue, which is drained before closing.
		 */
		setsockopt(lst.list[i].fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &off, sizeof(off));
		tcp++;
	}
	if (!tcp)
		return false;
	struct timeval tv = { 0, LISTENER_CLOSE_LINGER_USEC };
	lst.handoff_done = closed;
	lst.handoff_timer = evtimer_new(pgv.base, handoff_cb, NULL);
	event_add(lst.handoff_timer, &tv);
	return true;
}

bool listener_close_tcp_soon(void (*closed)(void))
{
	if (!close_tcp_soon(closed))
		return false;
	log_info("closing the TCP listeners in %d ms (connections under way are taken in first)",
		 (int)(LISTENER_CLOSE_LINGER_USEC / 1000));
	return true;
}

bool listener_hand_off_tcp(void (*closed)(void))
{
	if (!pgv.cfg->so_reuseport || !close_tcp_soon(closed))
		return false;
	log_info("so_reuseport: handing the port off, closing the TCP listeners in %d ms",
		 (int)(LISTENER_CLOSE_LINGER_USEC / 1000));
	/*
	 * Draining right before close() leaves Linux a window of microseconds
	 * to queue one more connection on the closing socket and reset it;
	 * only the kernel can hand such connections to a sibling (5.14+).
	 */
	if (tcp_sysctl("tcp_migrate_req", -1) == 0)
		log_warning("so_reuseport: net.ipv4.tcp_migrate_req is 0, so a client connecting at the instant "
			    "the listeners close can be reset; set it to 1 for rolling restarts");
	return true;
}

bool listener_handing_off(void)
{
	return lst.handoff_timer != NULL;
}

void listener_close(void)
{
	for (int i = 0; i < lst.count; i++) {
		struct listener *l = &lst.list[i];
		event_free(l->ev);
		close(l->fd);
		/* A new instance may already have bound the same path (rolling restart). */
		struct stat st;
		if (l->unix_path[0] && stat(l->unix_path, &st) == 0 && st.st_ino == l->unix_inode)
			unlink(l->unix_path);
		l->unix_path[0] = '\0';
	}
	lst.count = 0;
	if (lst.resume_timer)
		event_free(lst.resume_timer);
	lst.resume_timer = NULL;
	if (lst.handoff_timer)
		event_free(lst.handoff_timer);
	lst.handoff_timer = NULL;
}
