#!/usr/bin/env bash
#
# test/fuzz/run.sh - runs libFuzzer targets one after the other (the machine
# may be shared: never in parallel), from `make fuzz-smoke` / `make
# fuzz-long` in a build dir configured with --enable-fuzzing.
#
#   run.sh smoke FUZZDIR TARGET...   each target: its seeds, then
#                                    FUZZ_SMOKE_SECONDS (20) of fuzzing
#   run.sh long FUZZDIR TARGET...    each target: FUZZ_SECONDS (60); the
#                                    corpus grown in fuzz-out/ is kept for
#                                    the next run
#
# FUZZDIR holds corpus/<target>/ (seeds, and inputs that once crashed: every
# run replays them first) and dict/<target>.dict. Working corpora, logs and
# crash artifacts go to fuzz-out/<target>/ in the current directory. Exits
# non-zero if any target crashed, leaked, hung (-timeout) or blew its memory
# limit; prints each target's log tail then, and one line per target.
set -euo pipefail

mode=$1 fuzzdir=$2
shift 2
case $mode in
smoke) secs=${FUZZ_SMOKE_SECONDS:-20} ;;
long) secs=${FUZZ_SECONDS:-60} ;;
*) echo "usage: $0 smoke|long FUZZDIR TARGET..." >&2; exit 2 ;;
esac

status=0
summary=()
for target in "$@"; do
	name=$(basename "$target")
	out="fuzz-out/$name"
	# a smoke run starts from the seeds alone, so it tests the same thing each time
	[ "$mode" = smoke ] && rm -rf "$out"
	mkdir -p "$out/corpus"
	args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
		-artifact_prefix="$out/")
	case $name in
	# a startup packet may be 10000 bytes; text files get room for many lines
	fuzz_startup) args+=(-max_len=12000) ;;
	fuzz_config | fuzz_hba | fuzz_ident | fuzz_auth_file) args+=(-max_len=8192) ;;
	# statements long enough to nest past shard_parse's depth bound (1+1+... over 1,000 tokens)
	fuzz_shard_parse) args+=(-max_len=8192) ;;
	*) args+=(-max_len=2048) ;;
	esac
	[ -f "$fuzzdir/dict/$name.dict" ] && args+=(-dict="$fuzzdir/dict/$name.dict")
	# shard_parse's depth bound must leave libpg_query and protobuf-c a 4x
	# margin: what it lets through must parse within a quarter of the usual
	# 8 MB stack, and a text that hid deep nesting from the bound crashes
	# here long before it would in pgvalve
	stack=$(ulimit -s)
	[ "$name" = fuzz_shard_parse ] && stack=2048
	echo "fuzz: $name for ${secs}s"
	rc=0
	(ulimit -s "$stack" && exec "$target" "${args[@]}" "$out/corpus" "$fuzzdir/corpus/$name") >"$out/log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -n 1)
	corpus=$(find "$out/corpus" -type f | wc -l)
	if [ "$rc" -ne 0 ]; then
		status=1
		echo "======== $name FAILED (exit $rc); artifacts in $out/"
		tail -n 60 "$out/log"
		summary+=("$name: FAILED after ${execs:-?} execs (exit $rc, see $out/log)")
	else
		summary+=("$name: ${execs:-?} execs in ${secs}s, $corpus new corpus inputs, no crash")
	fi
done
echo
printf 'fuzz: %s\n' "${summary[@]}"
exit "$status"
