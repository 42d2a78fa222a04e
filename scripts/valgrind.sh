#!/usr/bin/env bash
#
# scripts/valgrind.sh - valgrind memcheck over the unit tests and a
# protocol-heavy subset of the integration tests. AddressSanitizer fills new
# memory with a fixed pattern, so it cannot see reads of uninitialised
# memory; memcheck does.
#
# Builds without sanitizers (-O1 -g) in build-valgrind/, then:
#   - each unit test binary under memcheck (definite leaks count too);
#   - the integration tests in VALGRIND_INTEGRATION with pgvalve run under
#     memcheck (test/valgrind/pgvalve-valgrind.sh as PGV_BINARY): the
#     harness fails a test whose pgvalve's memcheck log reports an error.
# Finally every memcheck log (forked Check children and pgvalve workers
# included) is checked for errors. Any error fails the run; suppressions
# are for libraries only (test/valgrind/libs.supp).
#
#   ./scripts/valgrind.sh
#   VALGRIND_INTEGRATION='test_wire test_auth:matrix' ./scripts/valgrind.sh
#   VALGRIND_INTEGRATION= ./scripts/valgrind.sh          unit tests only
#   VALGRIND_JOBS=1 ./scripts/valgrind.sh                one binary at a time (default 2, 1 on one core)
#
# An integration entry is a test binary, or binary:case for one Check test
# case (CK_RUN_CASE). Logs stay in build-valgrind/valgrind-logs/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

integration=${VALGRIND_INTEGRATION-test_wire test_txn test_session:auth test_session:robustness test_replication:logical_connection test_replication:physical_connection test_prepared test_varstate:learned test_channel_binding:client}

pgv_deps_ensure test || exit 2
pgv_deps_ensure valgrind || exit 2
build="$root/build-valgrind"
# --disable-werror: the -Werror gate is the sanitizer build (scripts/test.sh);
# -O1 here makes GCC warn about things -O0 and the sanitizer build do not.
pgv_build "$build" --disable-werror "CFLAGS=-O1 -g" || exit 2
make -C "$build" -s -j2 check TESTS= >/dev/null || exit 2

logs="$build/valgrind-logs"
rm -rf "$logs"
mkdir -p "$logs"
# pgvalve drops to the test user (-u) before it forks workers
chmod 1777 "$logs"
supp="$root/test/valgrind/libs.supp"
# Check's per-test timeouts and the harness's start/stop waits, scaled
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}

# Each binary runs in the background, VALGRIND_JOBS at a time (default 2, 1 on one core):
# memcheck keeps one core busy per pgvalve, and each integration binary
# brings up its own throwaway cluster on its own ports (run.sh), so two
# side by side do not meet. Its exit status goes to <out>.rc.
jobs_max=${VALGRIND_JOBS:-$(($(nproc) >= 2 ? 2 : 1))}
run_bg() {
	local out=$1
	shift
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
	(
		rc=0
		"$@" >"$out" 2>&1 || rc=$?
		echo "$rc" >"$out.rc"
	) &
}

status=0
results=()
started=$(date +%s)
outs=() names=()
for t in "$build"/test/unit/*/test_* "$build"/test/unit/*/*/test_*; do
	case $t in *.o | *.log | *.trs) continue ;; esac
	name=$(basename "$t")
	names+=("$name") outs+=("$logs/unit-$name.out")
	run_bg "$logs/unit-$name.out" valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite --track-origins=yes --suppressions="$supp" \
		--log-file="$logs/unit-$name.%p.log" "$t"
done
for entry in $integration; do
	bin=${entry%%:*} case_=
	[ "$bin" = "$entry" ] || case_=${entry#*:}
	out="$logs/$bin${case_:+-$case_}.out"
	names+=("$entry") outs+=("$out")
	run_bg "$out" env PGV_BINARY="$root/test/valgrind/pgvalve-valgrind.sh" PGV_VALGRIND_BINARY="$build/src/pgvalve" \
		PGV_VALGRIND_LOGDIR="$logs" ${case_:+CK_RUN_CASE="$case_"} "$build/test/integration/$bin"
done
wait
for i in "${!names[@]}"; do
	rc=$(cat "${outs[$i]}.rc" 2>/dev/null || echo "no status")
	if [ "$rc" != 0 ]; then
		status=1
		echo "======== ${names[$i]}: exit $rc"
		grep -v '^==' "${outs[$i]}" | tail -n 40
	fi
	results+=("${names[$i]}: exit $rc")
done

# Every log: a summary with errors, or (killed before its summary) a report.
nlogs=0 bad=0
for f in "$logs"/*.log; do
	[ -e "$f" ] || continue
	nlogs=$((nlogs + 1))
	if grep -q 'ERROR SUMMARY: [1-9]' "$f" ||
		{ ! grep -q 'ERROR SUMMARY:' "$f" &&
			grep -Eq 'uninitialised|Invalid (read|write|free)|Mismatched free|overlap|Syscall param' "$f"; }; then
		bad=$((bad + 1))
		status=1
		echo "======== memcheck errors in $f"
		head -n 60 "$f"
	fi
done
echo
printf 'valgrind: %s\n' "${results[@]}"
echo "valgrind: $nlogs memcheck logs, $bad with errors, $(($(date +%s) - started)) s"
exit "$status"
