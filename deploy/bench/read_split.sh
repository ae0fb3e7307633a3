#!/usr/bin/env bash
# The read/write split's share (issue 18's target: a sysbench oltp_read_only
# run sends >= 90% of its statements to the replica), counted by the servers
# themselves (COM_SELECT + COM_STMT_EXECUTE + writes, before and after).
#
# Runs the demo with a replica (scripts/demo.sh, DEMO_REPLICA=1: a GTID
# primary and replica, myplex with routing.read_write_split on, sysbench
# without explicit transactions) for oltp_read_only with text queries and
# with prepared statements, then oltp_read_write (its reads after its own
# writes wait for the replica or go to the primary), and prints each run's
# split as the servers counted it and as myplex routed it.
#
# Usage: deploy/bench/read_split.sh   (SECONDS_PER_RUN [20], THREADS [32],
#                                      OUT [/tmp/myplex-read-split])
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
THREADS=${THREADS:-32}
OUT=${OUT:-/tmp/myplex-read-split}
mkdir -p "$OUT"
cd "$REPO"
for run in oltp_read_only:disable oltp_read_only:auto oltp_read_write:auto; do
    test=${run%:*} ps=${run#*:}
    log="$OUT/$test.$ps.log"
    DEMO_REPLICA=1 DEMO_TEST=$test DEMO_PS_MODE=$ps DEMO_SECONDS=$SECONDS_PER_RUN \
        DEMO_THREADS=$THREADS scripts/demo.sh >"$log" 2>&1 || {
        tail -n 40 "$log" >&2
        exit 1
    }
    echo "== $test, --db-ps-mode=$ps, $THREADS clients, ${SECONDS_PER_RUN}s"
    grep -E "statements by the servers|reads routed here|read-your-writes|sysbench +: (transactions|queries)" "$log" |
        sed 's/^ */   /'
done
