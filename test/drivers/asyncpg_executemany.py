"""asyncpg's executemany() through pgvalve in transaction mode (issue 29):
one pipelined batch of Bind/Execute and a single Sync, once succeeding,
once failing in the middle (atomic: nothing is kept). Each runs on the
pool of one server (PGV_DRV_DB_ONE) with its connection kept open
afterwards; a second client of that pool must then be served at once.
Connection settings come from PGV_DRV_* (test_drivers.c)."""
import asyncio
import os
import sys
import time

import asyncpg

ONE = os.environ.get("PGV_DRV_DB_ONE", "one")


async def connect():
    e = os.environ
    return await asyncpg.connect(host=e["PGV_DRV_HOST"], port=int(e["PGV_DRV_PORT"]), database=ONE,
                                 user=e["PGV_DRV_USER"], password=e["PGV_DRV_PASSWORD"], ssl=False)


async def served_promptly(label):
    t = time.monotonic()
    other = await connect()
    try:
        assert await asyncio.wait_for(other.fetchval("SELECT 42"), 3) == 42
    finally:
        await other.close()
    took = time.monotonic() - t
    assert took < 3, f"{label}: the second client waited {took:.1f} s"


async def main():
    conn = await connect()
    await conn.execute("CREATE TABLE IF NOT EXISTS drv_many (k int PRIMARY KEY, v text)")
    await conn.execute("TRUNCATE drv_many")
    await conn.executemany("INSERT INTO drv_many VALUES ($1, $2)", [(i, str(i)) for i in range(1000)])
    assert await conn.fetchval("SELECT count(*) FROM drv_many") == 1000
    await served_promptly("executemany")

    rows = [(i, "again") for i in range(2000, 2500)] + [(5, "duplicate")] + [(i, "x") for i in range(3000, 3100)]
    try:
        await conn.executemany("INSERT INTO drv_many VALUES ($1, $2)", rows)
        raise AssertionError("the duplicate key was accepted")
    except asyncpg.exceptions.UniqueViolationError:
        pass
    assert await conn.fetchval("SELECT count(*) FROM drv_many") == 1000
    await served_promptly("executemany with an error")
    await conn.execute("DROP TABLE drv_many")
    await conn.close()
    print(f"ok: asyncpg {asyncpg.__version__} executemany, with and without an error; server given back")


if __name__ == "__main__":
    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
