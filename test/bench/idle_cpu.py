#!/usr/bin/env python3
"""idle_cpu.py - what idle clients cost a running pgvalve.

Opens N client connections to pgvalve (startup + md5/cleartext login up to
ReadyForQuery; with --tls over TLS, after an SSLRequest), keeps them idle, then samples the pooler's CPU time
(/proc/PID/stat utime+stime) over a window and its RSS before and after.
Prints CPU as a percentage of one core and RSS growth per connection.

    idle_cpu.py --pid PID --port 6432 --user U --password P --db D --n 20000 --window 20 [--tls]

Python standard library only. Raise the open-files limit first (ulimit -n).
"""
import argparse
import asyncio
import hashlib
import os
import ssl
import struct
import time

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def login(a, sem, keep):
    async with sem:
        r, w = await asyncio.open_connection(a.host, a.port)
        if a.tls:
            w.write(struct.pack("!II", 8, 80877103))     # SSLRequest
            if await r.readexactly(1) != b"S":
                raise RuntimeError("the pooler refused TLS")
            await w.start_tls(a.tls_context)
        body = struct.pack("!I", 196608) + b"user\0" + a.user.encode() + b"\0database\0" + a.db.encode() + b"\0\0"
        w.write(struct.pack("!I", len(body) + 4) + body)
        while True:
            hdr = await r.readexactly(5)
            n = struct.unpack("!I", hdr[1:])[0] - 4
            payload = await r.readexactly(n) if n else b""
            kind = hdr[:1]
            if kind == b"R":
                code = struct.unpack("!I", payload[:4])[0]
                if code == 5:
                    inner = hashlib.md5((a.password + a.user).encode()).hexdigest()
                    pw = "md5" + hashlib.md5(inner.encode() + payload[4:8]).hexdigest()
                elif code == 3:
                    pw = a.password
                else:
                    continue
                msg = pw.encode() + b"\0"
                w.write(b"p" + struct.pack("!I", len(msg) + 4) + msg)
            elif kind == b"E":
                raise RuntimeError(payload.decode(errors="replace"))
            elif kind == b"Z":
                keep.append(w)
                return


async def main(a):
    sem = asyncio.Semaphore(a.concurrency)
    keep = []
    rss0 = rss_kb(a.pid)
    t0 = time.monotonic()
    results = await asyncio.gather(*(login(a, sem, keep) for _ in range(a.n)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, Exception)]
    print("connected=%d failed=%d in %.1f s" % (len(keep), len(failed), time.monotonic() - t0))
    if failed:
        print("first error: %s" % failed[0])
    await asyncio.sleep(a.settle)
    rss1 = rss_kb(a.pid)
    c0, w0 = cpu_seconds(a.pid), time.monotonic()
    await asyncio.sleep(a.window)
    c1, w1 = cpu_seconds(a.pid), time.monotonic()
    print("idle window %.1f s: pooler CPU %.3f s = %.2f%% of one core" % (w1 - w0, c1 - c0, 100 * (c1 - c0) / (w1 - w0)))
    if keep:
        print("RSS %d kB -> %d kB: %.0f bytes per idle client" % (rss0, rss1, (rss1 - rss0) * 1024.0 / len(keep)))
    for w in keep:
        w.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", default=os.environ.get("PGPASSWORD", ""))
    p.add_argument("--db", required=True)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--settle", type=float, default=2.0)
    p.add_argument("--window", type=float, default=20.0)
    p.add_argument("--tls", action="store_true", help="log in over TLS (the certificate is not checked)")
    args = p.parse_args()
    args.tls_context = ssl.create_default_context()
    args.tls_context.check_hostname = False
    args.tls_context.verify_mode = ssl.CERT_NONE
    asyncio.run(main(args))
