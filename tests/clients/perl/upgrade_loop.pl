#!/usr/bin/perl
# One DBD::MariaDB session kept open while myplex is upgraded
# (tests/takeover.rs): see tests/clients/python/upgrade_loop.py for the
# contract. Statements are prepared on the server (mariadb_server_prepare).
use strict;
use warnings;
use DBI;
use Time::HiRes qw(usleep);

my $stop = $ENV{UL_STOP};
my $n = 0;
my $ok = eval {
    my $dsn = "DBI:MariaDB:database=$ENV{UL_DB};host=$ENV{UL_HOST};port=$ENV{UL_PORT};mariadb_server_prepare=1";
    my $c = DBI->connect($dsn, $ENV{UL_USER}, $ENV{UL_PASSWORD}, { RaiseError => 1, PrintError => 0 });
    $c->do(q{SET SESSION sql_mode = 'ANSI_QUOTES'});
    my ($cid) = $c->selectrow_array('SELECT CONNECTION_ID()');
    my $st = $c->prepare('SELECT ? + 1');
    while (!-e $stop) {
        # Apart: in any other prepared statement CONNECTION_ID() is the
        # backend's (docs/compatibility.md).
        my ($id) = $c->selectrow_array('SELECT CONNECTION_ID()');
        my ($mode) = $c->selectrow_array('SELECT @@sql_mode');
        if ($id != $cid || $mode ne 'ANSI_QUOTES') {
            print "error: session state lost: $id $mode after $n statements, expected $cid\n";
            exit 1;
        }
        $st->execute($n);
        my ($v) = $st->fetchrow_array;
        $st->finish;
        if ($v != $n + 1) {
            print "error: wrong answer $v for $n\n";
            exit 1;
        }
        $n++;
        usleep(10000);
    }
    1;
};
if (!$ok) {
    my $why = $@ || 'unknown';
    $why =~ s/\s+$//;
    print "error: $why after $n statements\n";
    exit 1;
}
print "ok statements=$n reconnects=0\n";
