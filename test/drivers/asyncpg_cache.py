"""asyncpg with its default statement cache (named __asyncpg_stmt_N__
statements) through pgvalve: CLIENTS concurrent connections, more than the
pool has servers. Connection settings come from PGV_DRV_* (test_drivers.c)."""
import asyncio
import os
import sys

import asyncpg

CLIENTS = int(os.environ.get("PGV_DRV_CLIENTS", "10"))
ROUNDS = int(os.environ.get("PGV_DRV_ROUNDS", "40"))


async def client(n):
    e = os.environ
    conn = await asyncpg.connect(host=e["PGV_DRV_HOST"], port=int(e["PGV_DRV_PORT"]), database=e["PGV_DRV_DB"],
                                 user=e["PGV_DRV_USER"], password=e["PGV_DRV_PASSWORD"], ssl=False)
    done = 0
    try:
        stmt = await conn.prepare("SELECT $1::int - $2::int")
        for i in range(ROUNDS):
            assert await conn.fetchval("SELECT $1::int + $2::int", i, n) == i + n
            rows = await conn.fetch("SELECT g FROM generate_series(1, $1::int) g", i % 5 + 1)
            assert [r["g"] for r in rows] == list(range(1, i % 5 + 2))
            assert await stmt.fetchval(i, n) == i - n
            async with conn.transaction():
                assert await conn.fetchval("SELECT $1::text", str(i)) == str(i)
            done += 4
            await asyncio.sleep(0)
    finally:
        await conn.close()
    return done


async def main():
    done = await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    print(f"ok: asyncpg {asyncpg.__version__}, {CLIENTS} clients, {sum(done)} prepared executions")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
