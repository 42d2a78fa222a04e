#!/usr/bin/env bash
#
# scripts/test.sh - the test command: dependencies, a sanitizer build in
# build/, and `make check` (unit tests, then the integration tests, which
# bring up their own throwaway PostgreSQL 15 cluster).
#
# As root it installs missing Debian packages with apt-get; otherwise it
# names them and stops. Exits with make check's status.
#
#   ./scripts/test.sh                 everything
#   TESTS='test/unit/base/test_config' ./scripts/test.sh   a subset (automake's TESTS)
#   PGV_CHECK_JOBS=1 ./scripts/test.sh                  one test binary at a time (default 2, 1 on one core)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

pgv_deps_ensure test || exit 2
build="$root/build"
pgv_build "$build" --enable-sanitizers || exit 2

status=0
started="$build/.pgvalve-check-started"
touch "$started"
# Two test binaries at a time (PGV_CHECK_JOBS; one on a single core):
# each integration binary brings up its own throwaway cluster on its own
# ports and keeps to its own temp dir (run.sh), and the serial run is
# nearly half of CI's time on 2 cores. Cases that once failed beside a busy
# neighbour (test_drain's first /ready, test_compat's
# server_fast_close_session, test_auth's scram_mock_salt_workers) wait for
# what they need now rather than for time.
check_jobs=${PGV_CHECK_JOBS:-$(($(nproc) >= 2 ? 2 : 1))}
make -C "$build" -j"$check_jobs" check ${TESTS:+TESTS="$TESTS"} || status=$?

if [ "$status" -ne 0 ] && [ -f "$build/test-suite.log" ]; then
	# test-suite.log holds the summary followed by every failing test's log.
	echo
	echo "======== $build/test-suite.log (with the logs of the failing tests)"
	cat "$build/test-suite.log"
fi

# One closing line for people and CI: Check's test cases where a test binary
# printed Check's summary ("NN%: Checks: N, Failures: F, Errors: E"), else
# automake's verdict for that test.
passed=0 failed=0 skipped=0
while IFS= read -r -d '' trs; do
	log=${trs%.trs}.log
	result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
	checks=$(grep -Eo '^[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" 2>/dev/null || true)
	if [ -n "$checks" ]; then
		bad=0
		while read -r _ _ n _ f _ e; do
			n=${n%,} f=${f%,}
			passed=$((passed + n - f - e))
			bad=$((bad + f + e))
		done <<<"$checks"
		# a binary that failed outside its test cases still counts once
		case $result in FAIL | ERROR | XPASS) [ "$bad" -gt 0 ] || bad=1 ;; esac
		failed=$((failed + bad))
	else
		case $result in
		PASS | XFAIL) passed=$((passed + 1)) ;;
		SKIP) skipped=$((skipped + 1)) ;;
		*) failed=$((failed + 1)) ;;
		esac
	fi
done < <(find "$build" -name '*.trs' -newer "$started" -print0 | sort -z)
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
