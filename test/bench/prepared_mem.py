"""Memory cost of tracked prepared statements (issue 16), measured as
pgvalve's RSS growth: N clients each Parse K named statements, either the
same K texts for everyone (shared) or texts of their own (distinct).

    python3 test/bench/prepared_mem.py PORT PID shared|distinct [N] [K]

Start a fresh pgvalve for each run (freed memory is reused), with an
open-files limit above N.

Talks the protocol by hand (trust auth, user and database postgres)."""
import asyncio
import struct
import sys


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def msg(t, body):
    return t + struct.pack("!I", len(body) + 4) + body


async def until_ready(r):
    while True:
        hdr = await r.readexactly(5)
        body = await r.readexactly(struct.unpack("!I", hdr[1:])[0] - 4)
        if hdr[:1] == b"E":
            raise RuntimeError(body)
        if hdr[:1] == b"Z":
            return


async def login(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    params = b"user\0postgres\0database\0postgres\0\0"
    w.write(struct.pack("!II", len(params) + 8, 196608) + params)
    await until_ready(r)
    return r, w


async def prepare(conn, i, k, distinct):
    r, w = conn
    out = b""
    for j in range(k):
        text = f"SELECT {j} AS c{j}, $1::int" + (f" + {i}" if distinct else "")
        out += msg(b"P", f"s{j}".encode() + b"\0" + text.encode() + b"\0" + b"\0\0")
    w.write(out + msg(b"S", b""))
    await until_ready(r)


async def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    k = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    for distinct in (sys.argv[3] == "distinct",):
        conns = []
        for start in range(0, n, 100):
            conns += await asyncio.gather(*(login(port) for _ in range(start, min(n, start + 100))))
        await asyncio.sleep(0.5)
        before = rss_kb(pid)
        for start in range(0, n, 50):
            await asyncio.gather(*(prepare(conns[i], i, k, distinct) for i in range(start, min(n, start + 50))))
        await asyncio.sleep(0.5)
        after = rss_kb(pid)
        per = (after - before) * 1024 / (n * k)
        print(f"{'distinct' if distinct else 'shared'}: {n} clients x {k} statements: "
              f"RSS +{after - before} kB, {per:.0f} bytes per client statement")
        for _, w in conns:
            w.close()
        await asyncio.sleep(1)


asyncio.run(main())
