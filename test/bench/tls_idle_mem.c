/*
 * tls_idle_mem.c - where an idle TLS client's bytes go in OpenSSL, for
 * issue 56's "memory per idle TLS client" (`make bench-tls-idle`).
 *
 *   tls_idle_mem CERT KEY [CONNECTIONS]
 *
 * Builds pgvalve's own client-side context (tls_configure() with
 * client_tls_sslmode = allow and the given certificate and key, every
 * other setting at its default), then for TLS 1.3 and TLS 1.2: a few
 * warm-up connections (OpenSSL fills caches of its own once per process:
 * method tables, names, Montgomery constants), then CONNECTIONS
 * connections over socket pairs, each a full handshake against a plain
 * OpenSSL client and one message each way, as an idle pgvalve client has
 * had. Every OpenSSL allocation goes through counting functions that
 * remember the allocation's source line, so what the server-side SSL
 * objects still hold afterwards is printed per line of OpenSSL's source,
 * with the total per connection: the figure idle.sh measures as RSS, by
 * where it is.
 */
#include "common.h"
#include "config.h"
#include "tls.h"

#include <fcntl.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRACK_SLOTS (1u << 22)

/* Live allocations by address (open addressing, tombstones on free). */
static struct site_alloc {
	void *ptr;
	const char *file;
	int line;
	size_t size;
} *track;
static bool tracking;

#define TOMBSTONE ((void *)1)

static size_t slot_of(const void *p)
{
	return (size_t)(((uintptr_t)p >> 4) * 2654435761u) & (TRACK_SLOTS - 1);
}

static void track_add(void *p, size_t size, const char *file, int line)
{
	if (!tracking || !p)
		return;
	size_t i = slot_of(p);
	while (track[i].ptr && track[i].ptr != TOMBSTONE)
		i = (i + 1) & (TRACK_SLOTS - 1);
	track[i] = (struct site_alloc){ p, file, line, size };
}

static void track_del(void *p)
{
	if (!p)
		return;
	for (size_t i = slot_of(p); track[i].ptr; i = (i + 1) & (TRACK_SLOTS - 1))
		if (track[i].ptr == p) {
			track[i].ptr = TOMBSTONE;
			return;
		}
}

static void *count_malloc(size_t n, const char *file, int line)
{
	void *p = malloc(n);
	track_add(p, p ? malloc_usable_size(p) : 0, file, line);
	return p;
}

static void *count_realloc(void *old, size_t n, const char *file, int line)
{
	track_del(old);
	void *p = realloc(old, n);
	track_add(p, p ? malloc_usable_size(p) : 0, file, line);
	return p;
}

static void count_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	track_del(p);
	free(p);
}

/* Runs both ends' handshakes over a socket pair until both are done. */
static bool handshake(SSL *client, SSL *server)
{
	for (int i = 0; i < 200; i++) {
		int a = SSL_do_handshake(client), b = SSL_do_handshake(server);
		if (a == 1 && b == 1)
			return true;
	}
	return false;
}

/* A connected pair: *server as pgvalve's client side makes it, *client a plain OpenSSL client. */
static bool connect_pair(SSL_CTX *cctx, SSL **client, SSL **server, int fds[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
		return false;
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	*client = SSL_new(cctx);
	*server = tls_new_client_ssl();
	if (!*client || !*server || !SSL_set_fd(*client, fds[1]) || !SSL_set_fd(*server, fds[0]))
		return false;
	SSL_set_connect_state(*client);
	SSL_set_accept_state(*server);
	if (!handshake(*client, *server))
		return false;
	char buf[64];
	/* a startup message in, an answer out: what a logged-in idle client has been through */
	return SSL_write(*client, "startup", 7) == 7 && SSL_read(*server, buf, sizeof(buf)) == 7 &&
	       SSL_write(*server, "ready", 5) == 5 && SSL_read(*client, buf, sizeof(buf)) == 5;
}

struct site_sum {
	const char *file;
	int line;
	size_t bytes, count;
};

static int by_bytes(const void *a, const void *b)
{
	const struct site_sum *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* Sums what is still tracked by source line and prints it per connection. */
static size_t report(const char *label, int n)
{
	static struct site_sum sums[512];
	size_t nsums = 0, total = 0;
	for (size_t i = 0; i < TRACK_SLOTS; i++) {
		struct site_alloc *a = &track[i];
		if (!a->ptr || a->ptr == TOMBSTONE)
			continue;
		size_t k = 0;
		while (k < nsums && !(sums[k].line == a->line && strcmp(sums[k].file, a->file) == 0))
			k++;
		if (k == nsums && nsums < 512)
			sums[nsums++] = (struct site_sum){ a->file, a->line, 0, 0 };
		if (k < nsums) {
			sums[k].bytes += a->size;
			sums[k].count++;
		}
		total += a->size;
	}
	qsort(sums, nsums, sizeof(sums[0]), by_bytes);
	printf("%s: %zu bytes per idle connection (%d connections), by OpenSSL source line:\n", label,
	       total / (size_t)n, n);
	for (size_t k = 0; k < nsums && sums[k].bytes / (size_t)n > 0; k++)
		printf("  %6zu B  %4.1f allocations  %s:%d\n", sums[k].bytes / (size_t)n,
		       (double)sums[k].count / n, sums[k].file, sums[k].line);
	return total / (size_t)n;
}

static int measure(const char *label, int max_version, int n)
{
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(cctx, max_version);
	SSL **clients = xcalloc((size_t)n, sizeof(*clients)), **servers = xcalloc((size_t)n, sizeof(*servers));
	int (*fds)[2] = xcalloc((size_t)n, sizeof(*fds));
	for (int i = 0; i < 4; i++) {	/* warm-up: OpenSSL's once-per-process caches */
		SSL *c, *s;
		int f[2];
		if (!connect_pair(cctx, &c, &s, f))
			return -1;
		SSL_free(c);
		SSL_free(s);
		close(f[0]);
		close(f[1]);
	}
	memset(track, 0, TRACK_SLOTS * sizeof(*track));
	tracking = true;
	for (int i = 0; i < n; i++) {
		if (!connect_pair(cctx, &clients[i], &servers[i], fds[i])) {
			ERR_print_errors_fp(stderr);
			return -1;
		}
	}
	tracking = false;
	for (int i = 0; i < n; i++)
		SSL_free(clients[i]);	/* the client ends' allocations leave the table: the servers' stay */
	report(label, n);
	for (int i = 0; i < n; i++) {
		SSL_free(servers[i]);
		close(fds[i][0]);
		close(fds[i][1]);
	}
	free(clients);
	free(servers);
	free(fds);
	SSL_CTX_free(cctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tls_idle_mem CERT KEY [CONNECTIONS]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 200;
	if (n < 1 || n > 20000) {
		fprintf(stderr, "tls_idle_mem: CONNECTIONS must be 1..20000\n");
		return 2;
	}
	if (!CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free)) {
		fprintf(stderr, "tls_idle_mem: OpenSSL allocated before main()\n");
		return 1;
	}
	track = xcalloc(TRACK_SLOTS, sizeof(*track));
	struct config *cfg = config_defaults();
	char err[256];
	if (config_set_param(cfg, config_find_param("client_tls_sslmode"), "allow", err, sizeof(err)) < 0 ||
	    config_set_param(cfg, config_find_param("client_tls_cert_file"), argv[1], err, sizeof(err)) < 0 ||
	    config_set_param(cfg, config_find_param("client_tls_key_file"), argv[2], err, sizeof(err)) < 0 ||
	    tls_configure(cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "tls_idle_mem: %s\n", err);
		return 1;
	}
	if (measure("TLSv1.3", TLS1_3_VERSION, n) < 0 || measure("TLSv1.2", TLS1_2_VERSION, n) < 0) {
		fprintf(stderr, "tls_idle_mem: a handshake failed\n");
		return 1;
	}
	printf("OpenSSL %s\n", OpenSSL_version(OPENSSL_VERSION));
	tls_cleanup();
	config_free(cfg);
	return 0;	/* track stays: OpenSSL frees more at exit, through count_free */
}
