"""psycopg 3 notifications (conn.notifies()) through pgvalve in transaction
pooling: CLIENTS listening connections and one that notifies from inside
transactions; every listener gets every notification in order, the sender
its own with its login PID. Connection settings come from PGV_DRV_*
(test_drivers.c)."""
import asyncio
import os
import sys

import psycopg

CLIENTS = int(os.environ.get("PGV_DRV_CLIENTS", "10"))
COUNT = 20


def conninfo():
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


async def collect(conn, want):
    got = []
    async for n in conn.notifies(timeout=15, stop_after=want):
        got.append(n)
    return got


async def main():
    listeners = [await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) for _ in range(CLIENTS)]
    sender = await psycopg.AsyncConnection.connect(conninfo(), autocommit=True)
    for conn in listeners + [sender]:
        await conn.execute("LISTEN drv")
    tasks = [asyncio.create_task(collect(conn, COUNT)) for conn in listeners]
    # The sender runs queries: its own notifications reach it through a handler, as they are read.
    own_got = []
    sender.add_notify_handler(own_got.append)
    await asyncio.sleep(0.2)
    for i in range(COUNT):
        async with sender.transaction():
            await sender.execute("SELECT pg_notify('drv', %s)", (str(i),))
    for _ in range(100):
        if len(own_got) >= COUNT:
            break
        await sender.execute("SELECT 1")
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*tasks) + [own_got]
    own = sender.info.backend_pid
    for k, got in enumerate(results):
        payloads = [int(n.payload) for n in got]
        assert payloads == list(range(COUNT)), f"client {k}: {payloads}"
        pids = {n.pid for n in got}
        if k == CLIENTS:
            assert pids == {own}, f"sender saw pids {pids}, its own is {own}"
        else:
            assert own not in pids, f"client {k} saw the sender's login pid {own}"
    for conn in listeners + [sender]:
        await conn.close()
    print(f"ok: psycopg {psycopg.__version__}, {CLIENTS + 1} clients, {COUNT} notifications each")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:  # the failing driver's own message is what the test shows
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
