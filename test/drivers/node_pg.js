// node-postgres named queries ({ name, text, values }) through pgvalve:
// CLIENTS concurrent connections, more than the pool has servers.
// Connection settings come from PGV_DRV_* (test_drivers.c).
'use strict';
const { Client } = require('pg');

const CLIENTS = Number(process.env.PGV_DRV_CLIENTS || 10);
const ROUNDS = Number(process.env.PGV_DRV_ROUNDS || 40);

async function client(n) {
  const c = new Client({
    host: process.env.PGV_DRV_HOST,
    port: Number(process.env.PGV_DRV_PORT),
    database: process.env.PGV_DRV_DB,
    user: process.env.PGV_DRV_USER,
    password: process.env.PGV_DRV_PASSWORD,
    ssl: false,
  });
  await c.connect();
  let done = 0;
  try {
    for (let i = 0; i < ROUNDS; i++) {
      let r = await c.query({ name: 'add', text: 'SELECT $1::int + $2::int AS v', values: [i, n] });
      if (r.rows[0].v !== i + n) throw new Error(`add: got ${r.rows[0].v}, want ${i + n}`);
      r = await c.query({ name: 'cat', text: "SELECT $1::text || '-' || $2::text AS v", values: [n, i] });
      if (r.rows[0].v !== `${n}-${i}`) throw new Error(`cat: got ${r.rows[0].v}`);
      done += 2;
    }
  } finally {
    await c.end();
  }
  return done;
}

(async () => {
  const counts = await Promise.all([...Array(CLIENTS).keys()].map(client));
  const pgVersion = require('pg/package.json').version;
  console.log(`ok: node-postgres ${pgVersion}, ${CLIENTS} clients, ${counts.reduce((a, b) => a + b, 0)} prepared executions`);
})().catch((e) => {
  console.log(`FAILED: ${e.message}`);
  process.exit(1);
});
