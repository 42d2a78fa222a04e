#!/usr/bin/env bash
#
# test/valgrind/pgvalve-valgrind.sh - stands in for pgvalve (PGV_BINARY) in
# the integration tests: execs PGV_VALGRIND_BINARY under memcheck with the
# same arguments. exec keeps the pid, so the harness's pidfile check, its
# signals and its waitpid reach the real process, and the log of the
# pgvalve the harness started is PGV_VALGRIND_LOGDIR/pgvalve.<pid>.log
# (forked workers get their own file: %p). The harness fails the test when
# that log reports an error; scripts/valgrind.sh checks every log at the end.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${PGV_VALGRIND_BINARY:?the pgvalve binary to run}"
: "${PGV_VALGRIND_LOGDIR:?the directory for valgrind logs}"
# --leak-check=no: pgvalve is stopped by signals (SIGQUIT exits at once
# without freeing), so a leak report would be noise here; the unit tests
# are leak-checked. Uninitialised values, invalid reads and writes, bad
# frees and overlapping copies are what this run is for.
exec valgrind --tool=memcheck --error-exitcode=99 --leak-check=no --track-origins=yes \
	--suppressions="$here/libs.supp" --log-file="$PGV_VALGRIND_LOGDIR/pgvalve.%p.log" \
	"$PGV_VALGRIND_BINARY" "$@"
