"""libpq 18 (the one psycopg's binary wheel bundles) asking for the newest
protocol (max_protocol_version=latest, 3.2): pgvalve speaks 3.2 with it,
without NegotiateProtocolVersion, and the long cancel key it hands out
cancels a running query through libpq's own cancel (PQcancelBlocking).
The same with max_protocol_version=3.0 and its 4-byte key. Connection
settings come from PGV_DRV_* (test_drivers.c)."""
import os
import sys
import threading
import time

import psycopg
from psycopg import errors, pq


def conninfo():
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


def cancel_running_sleep(conn):
    """Runs pg_sleep(5) on conn and cancels it from another thread with conn's key."""
    outcome = []

    def run():
        try:
            conn.execute("SELECT pg_sleep(5)")
            outcome.append("finished")
        except errors.QueryCanceled:
            outcome.append("canceled")
        except Exception as exc:  # reported below
            outcome.append(f"{type(exc).__name__}: {exc}")

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.7)
    started = time.monotonic()
    conn.cancel_safe()
    t.join(10)
    assert outcome == ["canceled"], f"outcome {outcome}"
    assert time.monotonic() - started < 3, "the cancel took too long"


def check(max_version, expected):
    with psycopg.connect(conninfo() + f" max_protocol_version={max_version}", autocommit=True) as conn:
        assert conn.execute("SELECT 40 + 2").fetchone()[0] == 42
        proto = conn.pgconn.full_protocol_version
        assert proto == expected, f"max_protocol_version={max_version}: protocol {proto}"
        cancel_running_sleep(conn)
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    return proto


def main():
    if pq.version() < 180000:
        raise RuntimeError(f"libpq {pq.version()} has no max_protocol_version")
    latest = check("latest", 30002)
    old = check("3.0", 30000)
    print(f"ok: libpq {pq.version()}: max_protocol_version=latest gives {latest}, 3.0 gives {old}; "
          "both cancel")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
