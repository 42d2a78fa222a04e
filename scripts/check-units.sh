#!/usr/bin/env bash
#
# scripts/check-units.sh [UNITDIR [BINARY]] - the systemd units pass
# `systemd-analyze verify` with no complaint at all (verify exits 0 on many
# parse warnings, so any output fails), and `systemd-analyze security` rates
# each service at most 4.0. UNITDIR defaults to etc/ of the source tree,
# BINARY (put in ExecStart, verify wants it to exist) to the build's
# src/pgvalve, else /usr/bin/pgvalve. The template is checked as
# pgvalve@a.service. Run by `make check` and test/package/run.sh; exits 77
# (skipped) without systemd-analyze.
set -euo pipefail

src=${abs_top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
unitdir=${1:-$src/etc}
binary=${2:-}
if [ -z "$binary" ]; then
	binary=/usr/bin/pgvalve
	[ -n "${abs_top_builddir:-}" ] && [ -x "$abs_top_builddir/src/pgvalve" ] && binary=$abs_top_builddir/src/pgvalve
fi
MAX_EXPOSURE=4.0

if ! command -v systemd-analyze >/dev/null; then
	echo "check-units: SKIP: no systemd-analyze (Debian package systemd)"
	exit 77
fi
[ -x "$binary" ] || { echo "check-units: $binary is not there" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/pgvunits.XXXXXX")
trap 'rm -rf "$work"' EXIT
for unit in pgvalve.service pgvalve.socket pgvalve@.service; do
	out=$unit
	[ "$unit" = pgvalve@.service ] && out=pgvalve@a.service
	sed "s|/usr/bin/pgvalve|$binary|g" "$unitdir/$unit" >"$work/$out"
done

# Documentation= is checked where man is there to check it.
man_opt=--man=no
command -v man >/dev/null && man -w pgvalve >/dev/null 2>&1 && man_opt=--man=yes

failed=0
for unit in pgvalve.service pgvalve.socket pgvalve@a.service; do
	log=$(cd "$work" && systemd-analyze verify "$man_opt" "$unit" 2>&1) && rc=0 || rc=$?
	if [ "$rc" -ne 0 ] || [ -n "$log" ]; then
		echo "check-units: systemd-analyze verify $unit (exit $rc):" >&2
		printf '%s\n' "$log" >&2
		failed=$((failed + 1))
	else
		echo "check-units: verify $unit: clean"
	fi
	case $unit in *.service)
		score=$(systemd-analyze security --offline=true "$work/$unit" 2>&1 |
			sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
		if awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s <= m) }'; then
			echo "check-units: security $unit: $score (at most $MAX_EXPOSURE)"
		else
			echo "check-units: security $unit: '$score', above $MAX_EXPOSURE" >&2
			failed=$((failed + 1))
		fi
		;;
	esac
done
[ "$failed" -eq 0 ]
