"""psycopg 3's read-only connections (conn.read_only = True: its
transactions begin READ ONLY) through pgvalve with load_balance_reads:
once the standbys' roles are known, each transaction runs on a replica,
while a read-write connection's transaction that inserts runs on the
primary. Connection settings come from PGV_DRV_* (test_drivers.c)."""
import os
import sys
import time

import psycopg

WHERE = "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery()"
COUNT = 20


def conninfo():
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


def where(conn, sql=WHERE, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        value = cur.fetchone()[0]
    conn.commit()
    return value


def main():
    ro = psycopg.connect(conninfo())
    ro.read_only = True
    deadline = time.monotonic() + 30
    while not where(ro).endswith("|true"):    # until pgvalve knows the standbys
        if time.monotonic() > deadline:
            print("FAILED: read-only transactions stay on the primary")
            return 1
        time.sleep(0.1)
    rw = psycopg.connect(conninfo())
    hosts = set()
    for i in range(COUNT):
        got = where(ro, WHERE + " WHERE %s > 0", (i + 1,))
        if not got.endswith("|true"):
            print(f"FAILED: read-only transaction {i} ran on {got}")
            return 1
        hosts.add(got)
        wrote = where(rw, "INSERT INTO drv_ro VALUES (%s) RETURNING pg_is_in_recovery()::text", (i,))
        if wrote != "false":
            print(f"FAILED: a write transaction ran on a standby ({wrote})")
            return 1
    print(f"ok: {COUNT} read-only transactions on {sorted(hosts)}, {COUNT} writes on the primary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
