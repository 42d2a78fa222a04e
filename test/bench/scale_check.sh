#!/usr/bin/env bash
#
# test/bench/scale_check.sh - the CI-sized scale run (issue 56): 20,000
# SCRAM clients logged in and held, 200 of them running 2,000
# transactions a second, then a storm of 5,000 TLS+SCRAM logins, through
# pgvalve (test/bench/scale.sh); then 5,000 TLS clients held. Asserts what does not depend on the
# machine's speed: every client and every storm client logged in, none
# lost, no established client waiting past a generous ceiling, idle
# memory per client within a bound. Reports, without asserting, the
# established clients' p99 during the storm against before it: a timing
# on a shared machine belongs in the benchmark (make bench-scale).
#
#   PGVALVE=path abs_top_builddir=dir scale_check.sh    (a build without sanitizers: .ci/run's build-cost/)
#
# Bounds, and why they hold on a loaded 2-core machine:
#   longest wait 10 s: a transaction waits behind the storm's logins at
#     most 8 login callbacks per turn of the loop (netbuf.h), a few ms
#     each; the measured longest was 74 ms on a busy machine;
#   1,500 bytes per idle client: measured 488-532 at 15,000-20,000
#     clients (the 1,000,000-client target is 500), so this catches a
#     per-client structure that grew, not allocator noise;
#   then 5,000 TLS clients held, 7,500 bytes each at most (issue 56's
#     target; measured 3,745 at 5,000, OpenSSL's session alone was 14 kB).
# Exit: 0 passed, 1 a bound broken, 2 the run itself failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
clients=20000 storm=5000
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$here/scale.sh" --clients "$clients" --active 200 --rate 2000 --storm "$storm" --storm-tls --duration 10 2>&1 |
	tee "$out"
line=$(grep '^bench-scale: pooler=pgvalve ' "$out" | tail -n 1)
[ -n "$line" ] || { echo "scale_check: no summary line: the run failed" >&2; exit 2; }

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
status=0
check() {	# check WHAT OK: a bound, printed either way
	if [ "$2" = 1 ]; then echo "scale_check: ok: $1"; else echo "scale_check: FAILED: $1" >&2; status=1; fi
}
logged=$(field logged_in) failed=$(field failed) sfailed=$(field storm_failed)
wait_ms=$(field longest_wait_ms) bpc=$(field bytes_per_client)
check "$logged of $clients clients logged in" "$([ "$logged" = "$clients" ] && echo 1)"
check "$failed failed logins or lost clients" "$([ "$failed" = 0 ] && echo 1)"
check "$sfailed of $storm storm logins failed" "$([ "$sfailed" = 0 ] && echo 1)"
check "longest wait of an active client ${wait_ms} ms (at most 10000)" \
	"$(awk -v w="$wait_ms" 'BEGIN { print (w != "-" && w + 0 <= 10000) ? 1 : 0 }')"
check "${bpc} bytes per idle client (at most 1500)" \
	"$(awk -v b="$bpc" 'BEGIN { print (b != "-" && b + 0 <= 1500) ? 1 : 0 }')"
echo "scale_check: established p99 before the storm $(field before_storm_p99_ms) ms, during it" \
	"$(field storm_p99_ms) ms (reported, not asserted); the storm took $(field storm_seconds) s"

# TLS clients held: TLS 1.3 leaves OpenSSL after the handshake (src/base/tls_record.h), so an idle
# TLS client costs a few kB, not OpenSSL's ~14 kB
tls_clients=5000
"$here/scale.sh" --clients "$tls_clients" --active 50 --rate 500 --tls --duration 3 2>&1 | tee "$out"
line=$(grep '^bench-scale: pooler=pgvalve ' "$out" | tail -n 1)
[ -n "$line" ] || { echo "scale_check: no summary line from the TLS run: the run failed" >&2; exit 2; }
logged=$(field logged_in) failed=$(field failed) bpc=$(field bytes_per_client)
check "$logged of $tls_clients TLS clients logged in, $failed failed" \
	"$([ "$logged" = "$tls_clients" ] && [ "$failed" = 0 ] && echo 1)"
check "${bpc} bytes per idle TLS client (at most 7500)" \
	"$(awk -v b="$bpc" 'BEGIN { print (b != "-" && b + 0 <= 7500) ? 1 : 0 }')"
exit "$status"
