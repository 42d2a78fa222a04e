"""asyncpg add_listener through pgvalve in transaction pooling: CLIENTS
listening connections and one that notifies from inside transactions;
every listener gets every notification in order, the sender its own with
its login PID (get_server_pid()). Connection settings come from PGV_DRV_*
(test_drivers.c)."""
import asyncio
import os
import sys

import asyncpg

CLIENTS = int(os.environ.get("PGV_DRV_CLIENTS", "10"))
COUNT = 20


async def connect():
    e = os.environ
    return await asyncpg.connect(host=e["PGV_DRV_HOST"], port=int(e["PGV_DRV_PORT"]), database=e["PGV_DRV_DB"],
                                 user=e["PGV_DRV_USER"], password=e["PGV_DRV_PASSWORD"], ssl=False)


async def main():
    conns = [await connect() for _ in range(CLIENTS + 1)]
    got = [[] for _ in conns]
    done = [asyncio.Event() for _ in conns]

    def listener(k):
        def cb(conn, pid, channel, payload):
            got[k].append((pid, int(payload)))
            if len(got[k]) == COUNT:
                done[k].set()
        return cb

    for k, conn in enumerate(conns):
        await conn.add_listener("drv", listener(k))
    sender = conns[-1]
    for i in range(COUNT):
        async with sender.transaction():
            await sender.execute(f"NOTIFY drv, '{i}'")
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in done)), 15)
    own = sender.get_server_pid()
    for k, items in enumerate(got):
        assert [p for _, p in items] == list(range(COUNT)), f"client {k}: {items}"
        pids = {pid for pid, _ in items}
        if k == CLIENTS:
            assert pids == {own}, f"sender saw pids {pids}, its own is {own}"
        else:
            assert own not in pids, f"client {k} saw the sender's login pid {own}"
    for conn in conns:
        await conn.close()
    print(f"ok: asyncpg {asyncpg.__version__}, {CLIENTS + 1} clients, {COUNT} notifications each")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:  # the failing driver's own message is what the test shows
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
