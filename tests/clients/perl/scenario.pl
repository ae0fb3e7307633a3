#!/usr/bin/perl
# Client-matrix scenario for Perl DBD::MariaDB (libmariadb, the MariaDB C
# connector). Run by tests/client_matrix.rs once against MariaDB directly and
# once through myplex; the two outputs must be identical byte for byte.
#
# Usage: perl scenario.pl VARIANT
#   defaults:  DBD::MariaDB's defaults (no multi statements, client-side
#              prepare, mariadb_client_found_rows on)
#   server_ps: mariadb_multi_statements=1, mariadb_server_prepare=1,
#              mariadb_client_found_rows=0 (server-side prepared statements:
#              only the first result set of a CALL is returned by the driver)
# Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.
use strict;
use warnings;
use DBI;

my $variant = shift // 'defaults';
my %attr = (RaiseError => 0, PrintError => 0, PrintWarn => 0, AutoCommit => 1);
if ($variant eq 'server_ps') {
    $attr{mariadb_multi_statements}  = 1;
    $attr{mariadb_server_prepare}    = 1;
    $attr{mariadb_client_found_rows} = 0;
} elsif ($variant ne 'defaults') {
    die "unknown variant $variant\n";
}

$| = 1;

sub esc {
    my ($s) = @_;
    $s =~ s/([^\x20-\x7e]|["\\])/sprintf('\\x%02x', ord($1))/ge;
    return $s;
}

# A value: NULL, or its bytes (UTF-8 encoded first when DBD::MariaDB returned
# a character string, marked with a leading u).
sub val {
    my ($v) = @_;
    return 'NULL' unless defined $v;
    my $u = '';
    if (utf8::is_utf8($v)) {
        utf8::encode($v);
        $u = 'u';
    }
    return $u . '"' . esc($v) . '"';
}

sub out { print @_, "\n" }

sub dbh_status {
    my ($dbh, $what) = @_;
    out(sprintf('  [%s] err=%s state=%s errstr="%s" insertid=%s warnings=%s info="%s"',
        $what, $dbh->err // 'undef', $dbh->state, esc($dbh->errstr // ''),
        $dbh->{mariadb_insertid} // 'undef', $dbh->{mariadb_warning_count} // 'undef',
        esc($dbh->{mariadb_info} // '')));
}

sub meta {
    my ($sth) = @_;
    my $n = $sth->{NUM_OF_FIELDS} // 0;
    for my $i (0 .. $n - 1) {
        out(sprintf('  field name=%s type=%s type_name=%s precision=%s scale=%s nullable=%s table=%s is_num=%s is_blob=%s',
            esc($sth->{NAME}[$i]), $sth->{TYPE}[$i] // 'undef', $sth->{mariadb_type_name}[$i] // 'undef',
            $sth->{PRECISION}[$i] // 'undef', $sth->{SCALE}[$i] // 'undef', $sth->{NULLABLE}[$i] // 'undef',
            esc($sth->{mariadb_table}[$i] // ''), $sth->{mariadb_is_num}[$i] // 'undef',
            $sth->{mariadb_is_blob}[$i] // 'undef'));
    }
}

# Prints every result set of an executed statement handle.
sub results {
    my ($dbh, $sth, $rv) = @_;
    my $set = 0;
    while (1) {
        out("  result $set rv=" . ($rv // 'undef'));
        if (($sth->{NUM_OF_FIELDS} // 0) > 0) {
            meta($sth);
            while (my $row = $sth->fetchrow_arrayref) {
                out('  row ' . join(' | ', map { val($_) } @$row));
            }
            out('  rows=' . $sth->rows);
        }
        out(sprintf('  [sth] err=%s state=%s errstr="%s" insertid=%s warnings=%s affected=%s',
            $sth->err // 'undef', $sth->state, esc($sth->errstr // ''),
            $sth->{mariadb_insertid} // 'undef', $sth->{mariadb_warning_count} // 'undef', $sth->rows));
        unless ($sth->more_results) {
            out(sprintf('  [more_results failed] err=%s state=%s errstr="%s"',
                $sth->err, $sth->state, esc($sth->errstr // ''))) if $sth->err;
            last;
        }
        $set++;
        $rv = undef;
    }
}

# do() for statements without a result.
sub run_do {
    my ($dbh, $sql, $attr) = @_;
    out('do: ' . val($sql));
    my $rv = $dbh->do($sql, $attr);
    out('  rv=' . ($rv // 'undef'));
    dbh_status($dbh, 'dbh');
}

# prepare + execute with parameters + every result set.
sub query {
    my ($dbh, $sql, @params) = @_;
    query_attr($dbh, $sql, undef, @params);
}

# query() with statement attributes.
sub query_attr {
    my ($dbh, $sql, $attr, @params) = @_;
    out('query: ' . val($sql) . (@params ? ' params=' . join(',', map { val($_) } @params) : ''));
    my $sth = $dbh->prepare($sql, $attr);
    unless ($sth) {
        dbh_status($dbh, 'prepare failed');
        return;
    }
    my $rv = $sth->execute(@params);
    unless (defined $rv) {
        dbh_status($dbh, 'execute failed');
        return;
    }
    results($dbh, $sth, $rv);
    $sth->finish;
    if (($dbh->{mariadb_warning_count} // 0) > 0) {
        # Not SHOW WARNINGS here: it is part of the scenario below.
        out('  warning_count=' . $dbh->{mariadb_warning_count});
    }
}

my $dsn = sprintf('DBI:MariaDB:database=%s;host=%s;port=%s', $ENV{CM_DB}, $ENV{CM_HOST}, $ENV{CM_PORT});
my $dbh = DBI->connect($dsn, $ENV{CM_USER}, $ENV{CM_PASSWORD}, \%attr);
unless ($dbh) {
    out("connect failed err=$DBI::err state=$DBI::state errstr=" . esc($DBI::errstr // ''));
    exit 0;
}
out("variant: $variant");
out('serverversion: ' . $dbh->{mariadb_serverversion});
out('serverinfo: ' . $dbh->{mariadb_serverinfo});
out('protoinfo: ' . $dbh->{mariadb_protoinfo});
out('server_prepare: ' . $dbh->{mariadb_server_prepare});

query($dbh, 'SELECT CONNECTION_ID() > 0 AS has_id');
query($dbh, 'SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, @@autocommit, @@sql_mode');
query($dbh, "SHOW SESSION STATUS LIKE 'Compression'");

run_do($dbh, 'DROP TABLE IF EXISTS t');
run_do($dbh, 'CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, '
    . 'vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON)');
run_do($dbh, "INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, 'caf\x{e9}', 'na\x{ef}ve \x{1F600}', 12.345, "
    . "'2024-02-29 13:14:15.123456', X'00FF10', '{\"a\": [1, 2.5, \"x\"], \"b\": null}'), "
    . "(NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
out('last_insert_id: ' . ($dbh->last_insert_id(undef, undef, undef, undef) // 'undef'));
query($dbh, 'SELECT LAST_INSERT_ID()');
query($dbh, 'SELECT * FROM t ORDER BY id');

run_do($dbh, 'UPDATE t SET n = n WHERE id = 1');
run_do($dbh, 'UPDATE t SET n = 1 WHERE id IN (1, 2)');

query($dbh, 'SELECT * FROM nosuch');
query($dbh, "SELECT CAST('x' AS INT) AS c");
query($dbh, 'SHOW WARNINGS');

# One handle executed twice with different parameters.
{
    my $sql = 'SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?';
    out("prepare: $sql");
    my $sth = $dbh->prepare($sql);
    for my $id (1, 2) {
        out("execute: id=$id");
        my $rv = $sth->execute($id);
        if (defined $rv) { results($dbh, $sth, $rv) } else { dbh_status($dbh, 'execute failed') }
    }
    $sql = 'INSERT INTO t (n, vu, d) VALUES (?, ?, ?)';
    out("prepare: $sql");
    $sth = $dbh->prepare($sql);
    for my $p ([7, 'seven', '7.5'], [8, undef, undef]) {
        out("execute: n=$p->[0]");
        my $rv = $sth->execute(@$p);
        if (defined $rv) { results($dbh, $sth, $rv) } else { dbh_status($dbh, 'execute failed') }
    }
}
query($dbh, 'SELECT LAST_INSERT_ID()');

# Transactions through the DBI API and through SQL.
out('begin_work: ' . ($dbh->begin_work // 'undef'));
run_do($dbh, 'INSERT INTO t (n) VALUES (100)');
out('commit: ' . ($dbh->commit // 'undef'));
run_do($dbh, 'START TRANSACTION');
run_do($dbh, 'INSERT INTO t (n) VALUES (200)');
run_do($dbh, 'ROLLBACK');
query($dbh, 'SELECT id, n FROM t WHERE n >= 100 ORDER BY id');

run_do($dbh, 'DROP PROCEDURE IF EXISTS p');
run_do($dbh, "CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; SELECT a + 1 AS second, 'x' AS s; SET b = a * 10; END");
query($dbh, 'CALL p(?, @o)', 4);
query($dbh, 'SELECT @o');
query($dbh, 'CALL p(?, @o)', 5);
query($dbh, 'SELECT @o');

# latin1: DBD::MariaDB always sends statements UTF-8 encoded, so after SET
# NAMES latin1 the server reads the two bytes of \xe9 as two latin1 characters.
run_do($dbh, 'SET NAMES latin1');
query($dbh, "SELECT 'caf\xe9' AS s, HEX('caf\xe9') AS h, vl, HEX(vl) FROM t WHERE id = 1");
query($dbh, 'SELECT @@character_set_client, @@collation_connection');
run_do($dbh, 'SET NAMES utf8mb4');

# Multi statements: refused unless mariadb_multi_statements. The server cannot
# prepare them, so they go through client-side prepare in both variants.
my $text = {mariadb_server_prepare => 0};
query_attr($dbh, 'SELECT 1 AS a; SELECT 2 AS b', $text);
query_attr($dbh, 'SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c', $text);
run_do($dbh, 'DO 1; DO 2', $text);

query($dbh, 'SELECT CONNECTION_ID() > 0 AS has_id');
$dbh->disconnect;
out('done');
