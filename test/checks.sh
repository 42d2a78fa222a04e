# test/checks.sh - what the root-only system tests (test/container,
# test/fleet, test/ha) share: sourced after scripts/deps.sh, with
# check_prefix set to the test's name ("test/fleet").
#
#   check WHAT COMMAND...   runs COMMAND; "ok: WHAT" or "FAILED: WHAT" (counted in $failures)
#   setup_failed WHY...     says so and exits 2 (the test could not run; not a failed check)
#   wait_for SECONDS COMMAND...   true once COMMAND succeeds (quietly), false after SECONDS
#   pick_pgvalve_binary ROOT      $PGV_BINARY, else ROOT's build/, else build-dev/ pgvalve
#   keep_or_remove DIR      the work directory goes, unless PGV_KEEP_TMP=1 (then it says where it is)

failures=0

check() {
	local what=$1
	shift
	if "$@"; then
		echo "$check_prefix: ok: $what"
	else
		echo "$check_prefix: FAILED: $what" >&2
		failures=$((failures + 1))
	fi
}

setup_failed() {
	echo "$check_prefix: setup failed: $*" >&2
	exit 2
}

wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

pick_pgvalve_binary() {
	local b
	for b in "${PGV_BINARY:-}" "$1/build/src/pgvalve" "$1/build-dev/src/pgvalve"; do
		[ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
	done
	echo "$check_prefix: no pgvalve binary (build it, or set PGV_BINARY)" >&2
	return 1
}

keep_or_remove() {
	if [ "${PGV_KEEP_TMP:-0}" = 1 ]; then
		echo "$check_prefix: kept $1"
	else
		rm -rf "$1"
	fi
}
