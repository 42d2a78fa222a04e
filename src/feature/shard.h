/*
 * shard.h - sharded databases (issue 57): a client of a database whose
 * [databases] entry has shards= and sharding_key= (config_shard.h).
 *
 * In this version the router is not there yet, so a login to a sharded
 * database is refused before authentication, with SQLSTATE 0A000
 * (feature_not_supported) and a message naming the database: it never
 * reaches a server of its own (a sharded entry has no host), and never a
 * shard by accident. The client kind CLIENT_SHARDED is where the router
 * will take such clients (one server per shard); it claims before
 * replication, so that a replication login to a sharded database is
 * refused the same way.
 *
 * Owns nothing yet. Reads the running configuration (pgv.cfg); reached
 * from the core only through its client_kind_ops table.
 */
#ifndef PGVALVE_SHARD_H
#define PGVALVE_SHARD_H

/* Start-up: registers the sharded client kind. */
void shard_register(void);

#endif
