<?php
// Client-matrix scenario for PHP mysqli (mysqlnd). Run by tests/client_matrix.rs
// once against MariaDB directly and once through myplex; the two outputs must
// be identical byte for byte.
//
// Usage: php scenario.php VARIANT
//   VARIANT: plain | found_rows | compress | latin1
// Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.
//
// mysqlnd never negotiates CLIENT_DEPRECATE_EOF, and never asks for
// CLIENT_MULTI_STATEMENTS at login: multi_query() switches it on with
// COM_SET_OPTION for one call and off again, so a stacked query() must fail.

mysqli_report(MYSQLI_REPORT_OFF);

$variant = $argv[1] ?? 'plain';
$flags = 0;
$charset = 'utf8mb4';
switch ($variant) {
    case 'plain':
        break;
    case 'found_rows':
        $flags |= MYSQLI_CLIENT_FOUND_ROWS;
        break;
    case 'compress':
        $flags |= MYSQLI_CLIENT_COMPRESS;
        break;
    case 'latin1':
        $charset = 'latin1';
        break;
    default:
        fwrite(STDERR, "unknown variant $variant\n");
        exit(2);
}

/** Bytes as printable ASCII, everything else as \xNN. */
function esc(string $s): string
{
    $out = '';
    $n = strlen($s);
    for ($i = 0; $i < $n; $i++) {
        $c = ord($s[$i]);
        if ($c >= 0x20 && $c < 0x7f && $c !== 0x5c && $c !== 0x22) {
            $out .= $s[$i];
        } else {
            $out .= sprintf('\\x%02x', $c);
        }
    }
    return $out;
}

function val($v): string
{
    if ($v === null) {
        return 'NULL';
    }
    if (is_int($v)) {
        return "int:$v";
    }
    if (is_float($v)) {
        return 'float:' . var_export($v, true);
    }
    if (is_string($v)) {
        return 'str:"' . esc($v) . '"';
    }
    return gettype($v) . ':' . esc(var_export($v, true));
}

function out(string $line): void
{
    echo $line, "\n";
}

function status(mysqli $db, string $what): void
{
    out("  [$what] affected=" . $db->affected_rows . " insert_id=" . $db->insert_id
        . " warnings=" . $db->warning_count . " info=\"" . esc((string)$db->info) . "\""
        . " errno=" . $db->errno . " sqlstate=" . $db->sqlstate . " error=\"" . esc($db->error) . "\"");
}

function fields(array $fields): void
{
    foreach ($fields as $f) {
        out(sprintf(
            '  field name=%s orgname=%s table=%s orgtable=%s db=%s len=%d charsetnr=%d flags=%d type=%d decimals=%d',
            esc($f->name),
            esc($f->orgname),
            esc($f->table),
            esc($f->orgtable),
            esc($f->db),
            $f->length,
            $f->charsetnr,
            $f->flags,
            $f->type,
            $f->decimals
        ));
    }
}

function result(mysqli_result $r): void
{
    fields($r->fetch_fields());
    while (($row = $r->fetch_row()) !== null) {
        out('  row ' . implode(' | ', array_map('val', $row)));
    }
    $r->free();
}

/** query() and print everything the API says about it. */
function q(mysqli $db, string $sql): void
{
    out('query: ' . esc($sql));
    $r = $db->query($sql);
    if ($r instanceof mysqli_result) {
        result($r);
    } elseif ($r === false) {
        out('  failed');
    }
    status($db, 'query');
    if ($db->warning_count > 0) {
        $w = $db->get_warnings();
        do {
            out("  warning errno=$w->errno sqlstate=$w->sqlstate message=\"" . esc($w->message) . '"');
        } while ($w->next());
    }
    while ($db->more_results()) {
        out('  more_results');
        if (!$db->next_result()) {
            status($db, 'next_result failed');
            break;
        }
        $r = $db->store_result();
        if ($r instanceof mysqli_result) {
            result($r);
        }
        status($db, 'next');
    }
}

/** multi_query() with every result set. */
function mq(mysqli $db, string $sql): void
{
    out('multi_query: ' . esc($sql));
    if (!$db->multi_query($sql)) {
        out('  failed');
        status($db, 'multi_query');
        return;
    }
    $i = 0;
    do {
        $r = $db->store_result();
        out("  result $i");
        if ($r instanceof mysqli_result) {
            result($r);
        }
        status($db, 'multi');
        $i++;
        if (!$db->more_results()) {
            break;
        }
        if (!$db->next_result()) {
            status($db, 'next_result failed');
            break;
        }
    } while (true);
}

function stmt_status(mysqli_stmt $s, string $what): void
{
    global $db;
    out("  [$what] affected=" . $s->affected_rows . " insert_id=" . $s->insert_id
        . " warnings=" . $db->warning_count . " field_count=" . $s->field_count
        . " param_count=" . $s->param_count
        . " errno=" . $s->errno . " sqlstate=" . $s->sqlstate . " error=\"" . esc($s->error) . "\"");
}

/** Execute a prepared statement with get_result() and all result sets. */
function stmt_run(mysqli_stmt $s, string $what): void
{
    out("execute: $what");
    if (!$s->execute()) {
        stmt_status($s, 'execute failed');
        return;
    }
    $i = 0;
    do {
        $r = $s->get_result();
        out("  result $i");
        if ($r instanceof mysqli_result) {
            result($r);
        }
        stmt_status($s, 'stmt');
        $i++;
        if (!$s->more_results()) {
            break;
        }
        if (!$s->next_result()) {
            stmt_status($s, 'next_result failed');
            break;
        }
    } while (true);
}

$db = mysqli_init();
$db->options(MYSQLI_SET_CHARSET_NAME, $charset);
$ok = $db->real_connect(
    getenv('CM_HOST'),
    getenv('CM_USER'),
    getenv('CM_PASSWORD'),
    getenv('CM_DB'),
    (int)getenv('CM_PORT'),
    null,
    $flags
);
if (!$ok) {
    out('connect failed errno=' . mysqli_connect_errno() . ' error="' . esc((string)mysqli_connect_error()) . '"');
    exit(0);
}
out("variant: $variant");
out('server_info: ' . $db->server_info);
out('server_version: ' . $db->server_version);
out('protocol_version: ' . $db->protocol_version);
out('character_set_name: ' . $db->character_set_name());
$cs = $db->get_charset();
out("charset: charset=$cs->charset collation=$cs->collation min=$cs->min_length max=$cs->max_length");

q($db, 'SELECT CONNECTION_ID() > 0 AS has_id');
q($db, 'SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, @@autocommit, @@sql_mode');
q($db, "SHOW SESSION STATUS LIKE 'Compression'");

// Table with one column of each kind, NULLs included.
q($db, 'DROP TABLE IF EXISTS t');
q($db, 'CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, '
    . 'vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON)');
if ($charset === 'latin1') {
    // The connection speaks latin1: send latin1 bytes; the emoji cannot be said.
    $vu = "na\xefve ?";
    $vl = "caf\xe9";
} else {
    $vu = "na\u{ef}ve \u{1F600}";
    $vl = "caf\u{e9}";
}
q($db, "INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, '$vl', '$vu', 12.345, '2024-02-29 13:14:15.123456', "
    . "X'00FF10', '{\"a\": [1, 2.5, \"x\"], \"b\": null}'), (NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
q($db, 'SELECT LAST_INSERT_ID()');
q($db, 'SELECT * FROM t ORDER BY id');

// Affected rows: matched but unchanged (FOUND_ROWS says 1), then 2 matched 1 changed.
q($db, 'UPDATE t SET n = n WHERE id = 1');
q($db, 'UPDATE t SET n = 1 WHERE id IN (1, 2)');

// Error and warnings.
q($db, 'SELECT * FROM nosuch');
q($db, "SELECT CAST('x' AS INT) AS c");
q($db, 'SHOW WARNINGS');

// Prepared statements (binary protocol), executed twice.
out('prepare: SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?');
$s = $db->prepare('SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?');
if ($s === false) {
    status($db, 'prepare failed');
} else {
    $id = 1;
    $s->bind_param('i', $id);
    stmt_run($s, 'id=1');
    $id = 2;
    stmt_run($s, 'id=2');
    $s->close();
}
out('prepare: INSERT INTO t (n, vu, d) VALUES (?, ?, ?)');
$s = $db->prepare('INSERT INTO t (n, vu, d) VALUES (?, ?, ?)');
if ($s === false) {
    status($db, 'prepare failed');
} else {
    $n = 7;
    $v = 'seven';
    $d = '7.5';
    $s->bind_param('iss', $n, $v, $d);
    stmt_run($s, 'n=7');
    $n = 8;
    $v = null;
    $d = null;
    stmt_run($s, 'n=8');
    $s->close();
}
q($db, 'SELECT LAST_INSERT_ID()');

// Transactions.
q($db, 'START TRANSACTION');
q($db, 'INSERT INTO t (n) VALUES (100)');
q($db, 'COMMIT');
q($db, 'START TRANSACTION');
q($db, 'INSERT INTO t (n) VALUES (200)');
q($db, 'ROLLBACK');
q($db, 'SELECT id, n FROM t WHERE n >= 100 ORDER BY id');

// A procedure with two result sets and an OUT parameter.
q($db, 'DROP PROCEDURE IF EXISTS p');
q($db, "CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; SELECT a + 1 AS second, 'x' AS s; SET b = a * 10; END");
q($db, 'CALL p(4, @o)');
q($db, 'SELECT @o');
out('prepare: CALL p(?, ?)');
$s = $db->prepare('CALL p(?, ?)');
if ($s === false) {
    status($db, 'prepare failed');
} else {
    $a = 5;
    $b = 0;
    $s->bind_param('ii', $a, $b);
    stmt_run($s, 'a=5');
    $a = 6;
    stmt_run($s, 'a=6');
    $s->close();
}

// latin1 round trip.
q($db, 'SET NAMES latin1');
q($db, "SELECT 'caf\xe9' AS s, HEX('caf\xe9') AS h, vl, HEX(vl) FROM t WHERE id = 1");
q($db, 'SELECT @@character_set_client, @@collation_connection');
q($db, $charset === 'latin1' ? 'SET NAMES latin1' : 'SET NAMES utf8mb4');

// Multi-statements: refused by query() (not negotiated), allowed by multi_query().
q($db, 'SELECT 1 AS a; SELECT 2 AS b');
mq($db, 'SELECT 1 AS a; SELECT 2 AS b');
mq($db, 'SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c');
q($db, 'SELECT 1 AS a; SELECT 2 AS b');

q($db, 'SELECT CONNECTION_ID() > 0 AS has_id');
$db->close();
out('done');
