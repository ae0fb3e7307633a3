// One mysql2 session kept open while myplex is upgraded (tests/takeover.rs):
// see tests/clients/python/upgrade_loop.py for the contract. `execute`
// prepares on the server.
'use strict';
const fs = require('fs');
const mysql = require('mysql2/promise');

const e = process.env;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  let n = 0;
  try {
    const c = await mysql.createConnection({
      host: e.UL_HOST, port: Number(e.UL_PORT), user: e.UL_USER,
      password: e.UL_PASSWORD, database: e.UL_DB,
    });
    await c.query("SET SESSION sql_mode = 'ANSI_QUOTES'");
    const [[{ id: cid }]] = await c.query('SELECT CONNECTION_ID() AS id');
    while (!fs.existsSync(e.UL_STOP)) {
      const [[row]] = await c.query('SELECT CONNECTION_ID() AS id, @@sql_mode AS mode');
      if (row.id !== cid || row.mode !== 'ANSI_QUOTES') {
        console.log(`error: session state lost: ${row.id} ${row.mode} after ${n} statements, expected ${cid}`);
        process.exit(1);
      }
      const [[{ v }]] = await c.execute('SELECT ? + 1 AS v', [n]);
      if (Number(v) !== n + 1) {
        console.log(`error: wrong answer ${v} for ${n}`);
        process.exit(1);
      }
      n++;
      await sleep(10);
    }
    await c.end();
  } catch (err) {
    console.log(`error: ${err.code || ''} ${err.message} after ${n} statements`);
    process.exit(1);
  }
  console.log(`ok statements=${n} reconnects=0`);
})();
