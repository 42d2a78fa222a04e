"""psycopg 3 with prepare_threshold=0 (every query prepared server-side)
through pgvalve: CLIENTS concurrent connections, more than the pool has
servers. Connection settings come from PGV_DRV_* (test_drivers.c)."""
import asyncio
import os
import sys

import psycopg

CLIENTS = int(os.environ.get("PGV_DRV_CLIENTS", "10"))
ROUNDS = int(os.environ.get("PGV_DRV_ROUNDS", "40"))


def conninfo():
    e = os.environ
    return (f"host={e['PGV_DRV_HOST']} port={e['PGV_DRV_PORT']} dbname={e['PGV_DRV_DB']} "
            f"user={e['PGV_DRV_USER']} password={e['PGV_DRV_PASSWORD']} sslmode=disable")


async def client(n):
    conn = await psycopg.AsyncConnection.connect(conninfo(), prepare_threshold=0, autocommit=True)
    done = 0
    async with conn:
        for i in range(ROUNDS):
            cur = await conn.execute("SELECT %s::int + %s::int", (i, n))
            assert (await cur.fetchone())[0] == i + n
            cur = await conn.execute("SELECT %s::text || '-' || %s::text", (str(n), str(i)))
            assert (await cur.fetchone())[0] == f"{n}-{i}"
            async with conn.transaction():
                cur = await conn.execute("SELECT %s::int * 2", (i,))
                assert (await cur.fetchone())[0] == i * 2
            done += 3
            await asyncio.sleep(0)
    return done


async def main():
    done = await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    print(f"ok: psycopg {psycopg.__version__}, {CLIENTS} clients, {sum(done)} prepared executions")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:  # the failing driver's own message is what the test shows
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
