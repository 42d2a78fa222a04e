/*
 * cancel_key.h - the BackendKeyData pgvalve hands its clients: the peer id
 * inside it, and for protocol 3.2 clients the long key that names the
 * instance owning the session.
 *
 * Several pgvalve (or PgBouncer) processes behind one port see a client's
 * CancelRequest arrive at any of them, so each puts its peer_id into the
 * keys it hands out, and one that does not know a key can send the request
 * on to the peer the key names (peer.h).
 *
 * Short key (protocol 3.0 and 3.1 clients), byte for byte as on the wire
 * (4 bytes "pid", 4 bytes key), the same as PgBouncer 1.19+ so the two can
 * peer with each other:
 *   - all 8 bytes random, except:
 *   - byte 0: high bit clear (a positive pid for clients that care);
 *   - with peer_id > 0: byte 1 = peer_id & 0xFF, byte 2 = peer_id >> 8,
 *     and the two low bits of byte 7 are a TTL, 3 when handed out (also
 *     without peer_id when peers_dns is set: a request it sends on to
 *     every instance goes with TTL 0, so none sends it on again).
 * Each forward lowers the TTL by one; at 0 the request is dropped, so a
 * misconfigured ring of peers cannot bounce a request forever. Local
 * lookups ignore the TTL bits (pool.c's cancel index masks them).
 *
 * Long key (protocol 3.2 clients: BackendKeyData's key may be up to 256
 * bytes; pgvalve's are CANCEL_KEY_LONG_LEN = 48). The pid is the short
 * key's pid; the key bytes are:
 *   0-3    the short key's last 4 bytes (TTL in the low bits of byte 3,
 *          always 3 when handed out): (pid, bytes 0-3) is the client's
 *          entry in the cancel index, and the pid carries the peer id
 *   4      format, CANCEL_KEY_FORMAT (1)
 *   5      the owner's address family: 0 none, 4 IPv4, 6 IPv6
 *   6-7    the owner's TCP port (network order)
 *   8-23   the owner's address (IPv4: bytes 8-11, the rest zero)
 *   24-27  the owning process's instance id (random, drawn once per process)
 *   28-47  HMAC-SHA-256 over pid (4 bytes) || bytes 0-27 with the TTL bits
 *          cleared, truncated to 20 bytes (160 bits)
 * The HMAC key is cancel_key_secret when set (the same on every instance
 * of a fleet), else a random secret of this process. A key whose HMAC does
 * not verify is never looked up locally and never forwarded by address:
 * without the secret nobody can make a key that sends pgvalve anywhere,
 * nor guess a local client's (the short key's 62 random bits are not
 * enough to cancel a 3.2 client: its key must match in full).
 *
 * The owner's address is put in only with cancel_key_secret set: it is
 * cancel_advertise_addr (an IP literal) and cancel_advertise_port (0: the
 * port the client came in on) when set, else the local address and port
 * of the client's TCP connection (a pod's own address behind a load
 * balancer); a client over a Unix socket without cancel_advertise_addr
 * gets family 0. Another instance with the same secret forwards a
 * CancelRequest it does not own to that address (peer.h), TTL lowered.
 */
#ifndef PGVALVE_CANCEL_KEY_H
#define PGVALVE_CANCEL_KEY_H

#include "common.h"

#include <sys/socket.h>

#define CANCEL_KEY_TTL_MASK 0x03u
#define CANCEL_KEY_SHORT_LEN 4		/* protocol 3.0: the key half of the 8 bytes */
#define CANCEL_KEY_LONG_LEN 48		/* what pgvalve hands 3.2 clients */
#define CANCEL_KEY_MAX 256		/* protocol 3.2's limit */
#define CANCEL_KEY_FORMAT 1

/* A CancelRequest's pid and key bytes as they came (or go) on the wire. */
struct cancel_request {
	uint32_t pid;
	uint16_t key_len;		/* CANCEL_KEY_SHORT_LEN .. CANCEL_KEY_MAX */
	uint8_t key[CANCEL_KEY_MAX];
};

/* A fresh random BackendKeyData (host byte order halves) carrying peer_id (0: none). */
void cancel_key_make(int peer_id, uint32_t *pid, uint32_t *key);
/* The peer id bytes 1-2 of a key carry (0: none). */
int cancel_key_peer_id(uint32_t pid);
/* The TTL bits of a key (byte 7). */
static inline unsigned cancel_key_ttl(uint32_t key) { return key & CANCEL_KEY_TTL_MASK; }

/*
 * The long key of a short one (pid, key from cancel_key_make) for a client
 * on TCP/Unix socket fd (is_unix: no local address to take); out must hold
 * CANCEL_KEY_LONG_LEN bytes.
 */
void cancel_key_make_long(uint32_t pid, uint32_t key, int fd, bool is_unix, uint8_t *out);

/*
 * The short key (host order) to look up in this process's cancel index, if
 * the request's key can be one of this process: 4 bytes, or a long key
 * whose HMAC verifies under this process's secret. False otherwise.
 */
bool cancel_key_local(const struct cancel_request *req, uint32_t *key);
/* A long key that verifies under cancel_key_secret (false when none is set). */
bool cancel_key_fleet_valid(const struct cancel_request *req);
/* A long key handed out by this very process (its instance id). */
bool cancel_key_is_own(const struct cancel_request *req);
/* The owner's address in a long key: false if it names none (family 0) or is malformed. */
bool cancel_key_owner(const struct cancel_request *req, struct sockaddr_storage *addr, socklen_t *len);
/* A request's TTL (low bits of key byte 3), and lowering it for a forward (TTL > 0). */
unsigned cancel_request_ttl(const struct cancel_request *req);
void cancel_request_lower_ttl(struct cancel_request *req);

#endif
