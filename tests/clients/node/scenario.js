'use strict';
// Client-matrix scenario for node mysql2 (pure JavaScript). Run by
// tests/client_matrix.rs once against MariaDB directly and once through
// myplex; the two outputs must be identical byte for byte.
//
// Usage: node scenario.js VARIANT
//   default       mysql2 defaults: no MULTI_STATEMENTS; FOUND_ROWS and
//                 IGNORE_SPACE on; MariaDB extended type info asked for
//   multi         multipleStatements: true, FOUND_ROWS off
//   collation255  charset UTF8MB4_0900_AI_CI: handshake collation 255, which
//                 MariaDB 10.11 does not know (it falls back to its default)
// Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.
// mysql2 is found through NODE_PATH (the harness installs it under target/).
// Run with TZ=UTC: DATETIME values become JavaScript Dates in local time.

const mysql = require('mysql2/promise');

const variant = process.argv[2] || 'default';
const lines = [];
function out(s) {
  lines.push(s);
}

function esc(s) {
  let r = '';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c >= 0x20 && c < 0x7f && ch !== '"' && ch !== '\\') r += ch;
    else r += '\\u{' + c.toString(16) + '}';
  }
  return r;
}

function val(v) {
  if (v === null) return 'NULL';
  if (v === undefined) return 'undefined';
  if (Buffer.isBuffer(v)) return 'Buffer:' + v.toString('hex');
  if (v instanceof Date) return 'Date:' + (isNaN(v) ? 'Invalid' : v.toISOString());
  if (typeof v === 'string') return 'string:"' + esc(v) + '"';
  if (typeof v === 'object') return 'object:' + esc(JSON.stringify(v));
  return typeof v + ':' + String(v);
}

function field(f) {
  return (
    `  field name=${esc(f.name)} orgName=${esc(f.orgName || '')} table=${esc(f.table || '')} ` +
    `db=${esc(f.schema || f.db || '')} columnType=${f.columnType} type=${f.type} ` +
    `typeName=${f.typeName || ''} characterSet=${f.characterSet} encoding=${f.encoding} ` +
    `columnLength=${f.columnLength} flags=${f.flags} decimals=${f.decimals}`
  );
}

function header(h) {
  return (
    `  header affectedRows=${h.affectedRows} insertId=${h.insertId} info="${esc(h.info || '')}" ` +
    `serverStatus=${h.serverStatus} warningStatus=${h.warningStatus} changedRows=${h.changedRows}`
  );
}

function showResult(rows, fields, depth) {
  if (Array.isArray(rows) && Array.isArray(fields) && fields.length > 0 && Array.isArray(fields[0])) {
    // Several result sets (multi statements, CALL).
    rows.forEach((r, i) => {
      out(`  result ${i}`);
      showResult(r, fields[i], depth + 1);
    });
    return;
  }
  if (Array.isArray(rows) && rows.length > 0 && !Array.isArray(fields) && rows.every((r) => r && r.constructor && r.constructor.name === 'ResultSetHeader')) {
    rows.forEach((r) => out(header(r)));
    return;
  }
  if (Array.isArray(fields)) {
    fields.forEach((f) => out(field(f)));
  }
  if (Array.isArray(rows)) {
    for (const row of rows) {
      if (row && row.constructor && row.constructor.name === 'ResultSetHeader') {
        out(header(row));
      } else {
        out('  row ' + row.map(val).join(' | '));
      }
    }
  } else if (rows) {
    out(header(rows));
  }
}

function error(e) {
  out(
    `  error code=${e.code} errno=${e.errno} sqlState=${e.sqlState} ` +
      `sqlMessage="${esc(e.sqlMessage || e.message || '')}" fatal=${e.fatal}`
  );
}

async function q(conn, sql, params) {
  out('query: ' + esc(sql) + (params ? ' params=' + esc(JSON.stringify(params)) : ''));
  try {
    const [rows, fields] = await conn.query({ sql, rowsAsArray: true }, params);
    showResult(rows, fields, 0);
  } catch (e) {
    error(e);
  }
}

async function x(conn, sql, params) {
  out('execute: ' + esc(sql) + (params ? ' params=' + esc(JSON.stringify(params)) : ''));
  try {
    const [rows, fields] = await conn.execute({ sql, rowsAsArray: true }, params);
    showResult(rows, fields, 0);
  } catch (e) {
    error(e);
  }
}

async function main() {
  const opts = {
    host: process.env.CM_HOST,
    port: Number(process.env.CM_PORT),
    user: process.env.CM_USER,
    password: process.env.CM_PASSWORD,
    database: process.env.CM_DB,
  };
  if (variant === 'multi') {
    opts.multipleStatements = true;
    opts.flags = ['-FOUND_ROWS'];
  } else if (variant === 'collation255') {
    opts.charset = 'UTF8MB4_0900_AI_CI';
  } else if (variant !== 'default') {
    throw new Error('unknown variant ' + variant);
  }
  out('variant: ' + variant);
  out('mysql2: ' + require('mysql2/package.json').version);
  let conn;
  try {
    conn = await mysql.createConnection(opts);
  } catch (e) {
    out('connect failed');
    error(e);
    return;
  }
  const hs = conn.connection._handshakePacket || {};
  out('serverVersion: ' + esc(String(hs.serverVersion)));
  out('handshake capabilityFlags: ' + hs.capabilityFlags + ' characterSet: ' + hs.characterSet);

  await q(conn, 'SELECT CONNECTION_ID() > 0 AS has_id');
  await q(conn, 'SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, @@autocommit, @@sql_mode');
  await q(conn, "SHOW SESSION STATUS LIKE 'Compression'");

  await q(conn, 'DROP TABLE IF EXISTS t');
  await q(
    conn,
    'CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, ' +
      'vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON)'
  );
  await q(
    conn,
    "INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, 'caf\u00e9', 'na\u00efve \u{1F600}', 12.345, " +
      "'2024-02-29 13:14:15.123456', X'00FF10', '{\"a\": [1, 2.5, \"x\"], \"b\": null}'), " +
      '(NULL, NULL, NULL, NULL, NULL, NULL, NULL)'
  );
  await q(conn, 'SELECT LAST_INSERT_ID()');
  await q(conn, 'SELECT * FROM t ORDER BY id');

  await q(conn, 'UPDATE t SET n = n WHERE id = 1');
  await q(conn, 'UPDATE t SET n = 1 WHERE id IN (1, 2)');

  await q(conn, 'SELECT * FROM nosuch');
  await q(conn, "SELECT CAST('x' AS INT) AS c");
  await q(conn, 'SHOW WARNINGS');
  // IGNORE_SPACE (a mysql2 default flag) makes this parse.
  await q(conn, 'SELECT COUNT (*) AS c FROM t');

  // Binary protocol: one statement executed twice (mysql2 caches it).
  await x(conn, 'SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?', [1]);
  await x(conn, 'SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?', [2]);
  await x(conn, 'INSERT INTO t (n, vu, d) VALUES (?, ?, ?)', [7, 'seven', '7.5']);
  await x(conn, 'INSERT INTO t (n, vu, d) VALUES (?, ?, ?)', [8, null, null]);
  await q(conn, 'SELECT LAST_INSERT_ID()');

  await conn.beginTransaction();
  out('beginTransaction');
  await q(conn, 'INSERT INTO t (n) VALUES (100)');
  await conn.commit();
  out('commit');
  await q(conn, 'START TRANSACTION');
  await q(conn, 'INSERT INTO t (n) VALUES (200)');
  await conn.rollback();
  out('rollback');
  await q(conn, 'SELECT id, n FROM t WHERE n >= 100 ORDER BY id');

  await q(conn, 'DROP PROCEDURE IF EXISTS p');
  await q(conn, "CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; SELECT a + 1 AS second, 'x' AS s; SET b = a * 10; END");
  await q(conn, 'CALL p(4, @o)');
  await q(conn, 'SELECT @o');
  await x(conn, 'CALL p(?, @o)', [5]);
  await x(conn, 'SELECT @o');
  await x(conn, 'CALL p(?, ?)', [6, 0]);

  // mysql2 keeps encoding statements as UTF-8 after SET NAMES; results are
  // decoded with each column's announced charset.
  await q(conn, 'SET NAMES latin1');
  await q(conn, "SELECT 'caf\u00e9' AS s, HEX('caf\u00e9') AS h, vl, HEX(vl) FROM t WHERE id = 1");
  await q(conn, 'SELECT @@character_set_client, @@collation_connection');
  await q(conn, 'SET NAMES utf8mb4');

  await q(conn, 'SELECT 1 AS a; SELECT 2 AS b');
  await q(conn, 'SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c');

  await q(conn, 'SELECT CONNECTION_ID() > 0 AS has_id');
  await conn.end();
  out('done');
}

main()
  .catch((e) => {
    out('uncaught: ' + esc(String(e && e.stack ? e.stack.split('\n')[0] : e)));
  })
  .finally(() => {
    process.stdout.write(lines.join('\n') + '\n');
  });
