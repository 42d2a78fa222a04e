"""test/faults/exhaust.py - the clients of test/faults/exhaustion.sh (issue 45).

  exhaust.py steady DSN CLIENTS SECONDS
      CLIENTS connections running SELECT 1 in a loop, each on the one
      connection it opened first; prints "steady: N queries, E errors,
      longest L s" and exits 1 on any error.
  exhaust.py storm HOST PORT COUNT SECONDS
      COUNT raw TCP connections, each sending a startup packet (so that
      tcp_defer_accept hands it to pgvalve) and then nothing, held SECONDS
      and closed; prints how many connected.
  exhaust.py noread HOST PORT USER PASSWORD DBNAME ROWS SECONDS
      logs in (md5), asks for ROWS rows of 1 kB and never reads them, for
      SECONDS; then closes.
"""

import hashlib
import socket
import struct
import sys
import threading
import time


def steady(dsn, clients, seconds):
    import psycopg

    stats = {"n": 0, "errors": [], "longest": 0.0}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def one():
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            with lock:
                stats["errors"].append("connect: %s" % e)
            return
        while time.monotonic() < stop:
            t0 = time.monotonic()
            try:
                conn.execute("SELECT 1").fetchone()
            except psycopg.Error as e:
                with lock:
                    stats["errors"].append(str(e))
                return
            took = time.monotonic() - t0
            with lock:
                stats["n"] += 1
                stats["longest"] = max(stats["longest"], took)
            time.sleep(0.02)
        conn.close()

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("steady: %d queries, %d errors, longest %.2f s %s" % (
        stats["n"], len(stats["errors"]), stats["longest"], "; ".join(stats["errors"][:3])))
    return 1 if stats["errors"] or stats["n"] == 0 else 0


def startup(user, dbname):
    body = struct.pack("!I", 3 << 16) + b"user\0" + user.encode() + b"\0database\0" + dbname.encode() + b"\0\0"
    return struct.pack("!I", len(body) + 4) + body


def storm(host, port, count, seconds):
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect((host, port))
            s.sendall(startup("app", "appdb"))
            socks.append(s)
        except OSError:
            s.close()
    print("storm: %d of %d connected" % (len(socks), count))
    sys.stdout.flush()
    time.sleep(seconds)
    for s in socks:
        s.close()
    return 0


def read_msg(s):
    head = b""
    while len(head) < 5:
        chunk = s.recv(5 - len(head))
        if not chunk:
            raise EOFError("closed")
        head += chunk
    n = struct.unpack("!I", head[1:5])[0] - 4
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            raise EOFError("closed")
        body += chunk
    return head[:1], body


def noread(host, port, user, password, dbname, rows, seconds):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    s.sendall(startup(user, dbname))
    while True:
        t, b = read_msg(s)
        if t == b"R" and struct.unpack("!I", b[:4])[0] == 5:
            inner = hashlib.md5(password.encode() + user.encode()).hexdigest().encode()
            pw = b"md5" + hashlib.md5(inner + b[4:8]).hexdigest().encode() + b"\0"
            s.sendall(b"p" + struct.pack("!I", len(pw) + 4) + pw)
        elif t == b"E":
            print("noread: login error %r" % b)
            return 1
        elif t == b"Z":
            break
    q = b"SELECT repeat('x', 1000) FROM generate_series(1, %d)\0" % rows
    s.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)
    print("noread: asked for %d rows of 1 kB, reading none" % rows)
    sys.stdout.flush()
    time.sleep(seconds)
    s.close()
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "steady":
        return steady(argv[2], int(argv[3]), float(argv[4]))
    if cmd == "storm":
        return storm(argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
    if cmd == "noread":
        return noread(argv[2], argv[3], argv[4], argv[5], argv[6], int(argv[7]), float(argv[8]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
