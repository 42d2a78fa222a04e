#!/usr/bin/env bash
#
# test/difftest/run.sh - the differential protocol test (difftest.py) on
# the throwaway PostgreSQL cluster of test/integration/run.sh.
#
#   test/difftest/run.sh [difftest.py options]      e.g. --replay FILE.json
#
# `make difftest`, `make difftest-explore` and `make difftest-long` call it
# with DIFFTEST_* set (see difftest.py). abs_top_builddir (default: ./build
# of this checkout) names the pgvalve build under test; failing sequences
# are written to $abs_top_builddir/difftest-failures/ unless DIFFTEST_OUT
# says otherwise.
# Exit: difftest.py's (0 equal, 1 a failure, 99 the fixture failed),
# 77 when PostgreSQL 15 is not installed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
export abs_top_builddir=${abs_top_builddir:-$srcdir/build}
export DIFFTEST_OUT=${DIFFTEST_OUT:-$abs_top_builddir/difftest-failures}
# run.sh passes no arguments to a test program: difftest.py reads them from here
DIFFTEST_ARGV=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
export DIFFTEST_ARGV
# run.sh's bound on one test program: the time asked for, shrinking and start-up
# on top (the fixed seeds of seeds.txt take about 100 s on 2 cores)
seconds=${DIFFTEST_SECONDS:-100}
export PGV_TEST_BINARY_TIMEOUT=${PGV_TEST_BINARY_TIMEOUT:-$((${seconds%.*} * 2 + 1200))}
# run.sh shows a test's output when it ends; difftest.py reports as it goes on fd 3
exec 3>&1
export DIFFTEST_LIVE_FD=3
exec "$srcdir/test/integration/run.sh" "$here/difftest.py"
