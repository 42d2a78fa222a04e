"""test/faults/soak.py - the workload of test/faults/soak.sh (issue 45, point 4).

  soak.py DSN_TX DSN_SESSION SECONDS COUNTFILE

A mixed workload at a fixed rate (each kind paced to RATE per second):
simple queries, extended ones with parameters, prepared statements
(prepare_threshold 0), COPY in and out, LISTEN/NOTIFY (session mode) and
a login per operation, through pgvalve. Every 2 s the transactions done
so far go to COUNTFILE (for the sampler's CPU per transaction); at the end
"soak: N transactions, E errors" (errors come from the backend kills and
reloads soak.sh injects: the operation is retried on a new connection).
"""

import os
import sys
import threading
import time

import psycopg

RATE = 20  # operations per second per kind
done = {"n": 0, "errors": 0}
first = {}  # the first error of each kind
lock = threading.Lock()


def paced(fn, stop, connect):
    conn = None
    period = 1.0 / RATE
    nxt = time.monotonic()
    while not stop.is_set():
        nxt += period
        try:
            if conn is None or conn.closed:
                conn = connect()
            fn(conn)
            with lock:
                done["n"] += 1
        except Exception as e:  # psycopg's errors, and a bug here must not end the thread quietly
            with lock:
                done["errors"] += 1
                first.setdefault(fn.__name__, "%s: %s" % (type(e).__name__, e))
            try:
                conn.close()
            except Exception:
                pass
            conn = None
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            nxt = time.monotonic()
    if conn is not None:
        conn.close()


def main(dsn_tx, dsn_s, seconds, countfile):
    stop = threading.Event()

    def tx():
        return psycopg.connect(dsn_tx, autocommit=True)

    def simple(conn):
        with psycopg.ClientCursor(conn) as cur:
            cur.execute("SELECT 1, 'simple'")
            cur.fetchall()

    def extended(conn):
        conn.execute("SELECT %s::int + 1", (41,)).fetchone()

    def prepared(conn):
        conn.execute("SELECT count(*) FROM soak WHERE k = %s", (7,), prepare=True).fetchone()

    def copy(conn):
        with conn.transaction():
            with conn.cursor().copy("COPY soak (k, v) FROM STDIN") as cp:
                for i in range(20):
                    cp.write_row((i, "row %d" % i))
            conn.execute("DELETE FROM soak WHERE k < 20")
        with conn.cursor().copy("COPY (SELECT g FROM generate_series(1, 50) g) TO STDOUT") as cp:
            for _ in cp:
                pass

    def login(_conn):
        psycopg.connect(dsn_tx, autocommit=True).close()

    def notify(conn):
        got = []
        conn.add_notify_handler(got.append)
        try:
            conn.execute("LISTEN soak")
            conn.execute("NOTIFY soak, 'x'")  # its own notification comes before the answer
            conn.execute("UNLISTEN soak")
        finally:
            conn.remove_notify_handler(got.append)
        if not got:
            raise psycopg.OperationalError("notification lost")

    def session():
        return psycopg.connect(dsn_s, autocommit=True)

    kinds = [(simple, tx), (extended, tx), (prepared, lambda: psycopg.connect(dsn_tx, autocommit=True, prepare_threshold=0)),
             (copy, tx), (login, lambda: None), (notify, session)]
    threads = [threading.Thread(target=paced, args=(fn, stop, conn), daemon=True) for fn, conn in kinds]
    for t in threads:
        t.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(2)
        with open(countfile + ".tmp", "w") as f:
            f.write("%d %d\n" % (done["n"], done["errors"]))
        os.replace(countfile + ".tmp", countfile)
    stop.set()
    for t in threads:
        t.join(10)
    print("soak: %d transactions, %d errors" % (done["n"], done["errors"]))
    for kind, err in sorted(first.items()):
        print("soak: first %s error: %s" % (kind, err))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]))
