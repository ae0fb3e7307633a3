<?php
// One mysqli (mysqlnd) session kept open while myplex is upgraded
// (tests/takeover.rs): see tests/clients/python/upgrade_loop.py for the
// contract. A server-side prepared statement is executed throughout.
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
$e = getenv();
$stop = $e['UL_STOP'];
$n = 0;
try {
    $c = new mysqli($e['UL_HOST'], $e['UL_USER'], $e['UL_PASSWORD'], $e['UL_DB'], (int)$e['UL_PORT']);
    $c->query("SET SESSION sql_mode = 'ANSI_QUOTES'");
    $cid = $c->query('SELECT CONNECTION_ID()')->fetch_row()[0];
    $st = $c->prepare('SELECT ? + 1');
    while (!file_exists($stop)) {
        $row = $c->query('SELECT CONNECTION_ID(), @@sql_mode')->fetch_row();
        if ($row[0] != $cid || $row[1] !== 'ANSI_QUOTES') {
            echo "error: session state lost: {$row[0]} {$row[1]} after $n statements, expected $cid\n";
            exit(1);
        }
        $st->bind_param('i', $n);
        $st->execute();
        $v = $st->get_result()->fetch_row()[0];
        if ((int)$v !== $n + 1) {
            echo "error: wrong answer $v for $n\n";
            exit(1);
        }
        $n++;
        usleep(10000);
    }
} catch (Throwable $t) {
    echo 'error: ' . get_class($t) . ': ' . $t->getMessage() . " after $n statements\n";
    exit(1);
}
echo "ok statements=$n reconnects=0\n";
