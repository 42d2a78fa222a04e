"""psycopg 3's pipeline mode through pgvalve in transaction mode (issue 29):
plain, with prepared statements, and with an error followed by a late
sync. Each runs on the pool of one server (PGV_DRV_DB_ONE) with its
connection kept open afterwards; a second client of that pool must then
be served at once, which it is only if the pipeline gave the server
back. Connection settings come from PGV_DRV_* (test_drivers.c)."""
import os
import signal
import sys
import time

import psycopg

ONE = os.environ.get("PGV_DRV_DB_ONE", "one")


def conninfo(db):
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={db} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


def served_promptly(label):
    """A second client of the pool of one gets the server within 3 s."""
    t = time.monotonic()
    with psycopg.connect(conninfo(ONE), autocommit=True) as other:
        assert other.execute("SELECT 42").fetchone()[0] == 42
    took = time.monotonic() - t
    assert took < 3, f"{label}: the second client waited {took:.1f} s"


def plain(conn):
    cur = conn.cursor()
    with conn.pipeline():
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]
        for i in range(5):
            cur.execute("SELECT %s::int + 1", (i,))
        assert cur.fetchall() == [(5,)]


def prepared(conn):
    with conn.pipeline():
        curs = [conn.cursor() for _ in range(5)]
        for i, cur in enumerate(curs):
            cur.execute("SELECT %s::int * 2", (i,), prepare=True)
        assert [cur.fetchone()[0] for cur in curs] == [0, 2, 4, 6, 8]


def with_error(conn):
    """The issue's reproduction: an error, the next query sent after it came back, a late sync."""
    cur = conn.cursor()
    with conn.pipeline() as p:
        failed = False
        try:
            cur.execute("SELECT aaaa")
            time.sleep(0.1)
            cur.execute("SELECT 123")
            cur.fetchall()
        except (psycopg.errors.UndefinedColumn, psycopg.errors.PipelineAborted):
            failed = True
        assert failed, "no error from SELECT aaaa"
        try:
            p.sync()
        except psycopg.errors.PipelineAborted:
            pass
        cur.execute("SELECT 1", prepare=True)
        assert cur.fetchall() == [(1,)]
    assert conn.execute("SELECT 2", prepare=True).fetchone()[0] == 2


def on_alarm(signum, frame):
    raise TimeoutError("no answer within 60 s")


def main():
    signal.signal(signal.SIGALRM, on_alarm)	# a hang fails the script, with its own message
    signal.alarm(60)
    for flow in (plain, prepared, with_error):
        conn = psycopg.connect(conninfo(ONE), autocommit=True)
        flow(conn)
        served_promptly(flow.__name__)
        conn.close()
    print(f"ok: psycopg {psycopg.__version__} pipeline mode: plain, prepared, with an error; server given back")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # the failing driver's own message is what the test shows
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
