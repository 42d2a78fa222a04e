"""libpq 18 (the one psycopg's binary wheel bundles) asking for the newest
protocol (max_protocol_version=latest, 3.2): pgvalve answers with
NegotiateProtocolVersion, libpq falls back to 3.0 and the session works.
Connection settings come from PGV_DRV_* (test_drivers.c)."""
import os
import sys

import psycopg
from psycopg import pq


def conninfo():
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


def main():
    if pq.version() < 180000:
        raise RuntimeError(f"libpq {pq.version()} has no max_protocol_version")
    with psycopg.connect(conninfo() + " max_protocol_version=latest") as conn:
        assert conn.execute("SELECT 40 + 2").fetchone()[0] == 42
        proto = conn.pgconn.protocol_version
        assert proto == 3, f"protocol {proto}"
        # a cancel key of the 3.0 size still cancels (the key pgvalve handed out)
        conn.cancel_safe()
    print(f"ok: libpq {pq.version()} with max_protocol_version=latest, protocol {proto}")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
