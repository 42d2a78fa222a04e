// node-postgres client.on('notification') through pgvalve in transaction
// pooling: CLIENTS listening connections and one that notifies from inside
// transactions; every listener gets every notification in order, the sender
// its own with its login PID (processID). Settings come from PGV_DRV_*
// (test_drivers.c).
'use strict';
const { Client } = require('pg');

const CLIENTS = Number(process.env.PGV_DRV_CLIENTS || 10);
const COUNT = 20;

function newClient() {
  return new Client({
    host: process.env.PGV_DRV_HOST,
    port: Number(process.env.PGV_DRV_PORT),
    database: process.env.PGV_DRV_DB,
    user: process.env.PGV_DRV_USER,
    password: process.env.PGV_DRV_PASSWORD,
    ssl: false,
  });
}

(async () => {
  const conns = [...Array(CLIENTS + 1)].map(newClient);
  const got = conns.map(() => []);
  const done = conns.map((c, k) => new Promise((resolve) => {
    c.on('notification', (msg) => {
      got[k].push([msg.processId, Number(msg.payload)]);
      if (got[k].length === COUNT) resolve();
    });
  }));
  for (const c of conns) {
    await c.connect();
    await c.query('LISTEN drv');
  }
  const sender = conns[CLIENTS];
  for (let i = 0; i < COUNT; i++) {
    await sender.query('BEGIN');
    await sender.query('SELECT pg_notify($1, $2)', ['drv', String(i)]);
    await sender.query('COMMIT');
  }
  let timer;
  await Promise.race([Promise.all(done),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timeout: got ${got.map((g) => g.length)}`)), 15000); })]);
  clearTimeout(timer);
  const own = sender.processID;
  got.forEach((items, k) => {
    const payloads = items.map((x) => x[1]);
    if (payloads.join() !== [...Array(COUNT).keys()].join()) throw new Error(`client ${k}: ${payloads}`);
    const pids = new Set(items.map((x) => x[0]));
    if (k === CLIENTS && (pids.size !== 1 || !pids.has(own))) throw new Error(`sender saw pids ${[...pids]}, its own is ${own}`);
    if (k !== CLIENTS && pids.has(own)) throw new Error(`client ${k} saw the sender's login pid ${own}`);
  });
  for (const c of conns) await c.end();
  console.log(`ok: node-postgres ${require('pg/package.json').version}, ${CLIENTS + 1} clients, ${COUNT} notifications each`);
})().catch((e) => {
  console.log(`FAILED: ${e.message}`);
  process.exit(1);
});
