/*
 * cancel_key.h - the BackendKeyData pgvalve hands its clients, and the
 * peer id inside it.
 *
 * Several pgvalve (or PgBouncer) processes behind one port see a client's
 * CancelRequest arrive at any of them, so each puts its peer_id into the
 * keys it hands out, and one that does not know a key can send the request
 * on to the peer the key names (peer.h).
 *
 * Key layout, byte for byte as on the wire (4 bytes "pid", 4 bytes key),
 * the same as PgBouncer 1.19+ so the two can peer with each other:
 *   - all 8 bytes random, except:
 *   - byte 0: high bit clear (a positive pid for clients that care);
 *   - with peer_id > 0: byte 1 = peer_id & 0xFF, byte 2 = peer_id >> 8,
 *     and the two low bits of byte 7 are a TTL, 3 when handed out.
 * Each forward lowers the TTL by one; at 0 the request is dropped, so a
 * misconfigured ring of peers cannot bounce a request forever. Local
 * lookups ignore the TTL bits (pool.c's cancel index masks them).
 *
 */
#ifndef PGVALVE_CANCEL_KEY_H
#define PGVALVE_CANCEL_KEY_H

#include "pgvalve/common.h"

#define CANCEL_KEY_TTL_MASK 0x03u

/* A fresh random BackendKeyData (host byte order halves) carrying peer_id (0: none). */
void cancel_key_make(int peer_id, uint32_t *pid, uint32_t *key);
/* The peer id bytes 1-2 of a key carry (0: none). */
int cancel_key_peer_id(uint32_t pid);
/* The TTL bits of a key (byte 7). */
static inline unsigned cancel_key_ttl(uint32_t key) { return key & CANCEL_KEY_TTL_MASK; }

#endif
