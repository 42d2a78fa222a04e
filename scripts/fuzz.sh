#!/usr/bin/env bash
#
# scripts/fuzz.sh - the libFuzzer targets of test/fuzz/: installs clang and
# libFuzzer (as root, apt-get), builds them with ASan and UBSan in
# build-fuzz/ (./configure --enable-fuzzing CC=clang-14) and runs them one
# after the other. Exits non-zero if any target crashed, leaked or hung.
#
#   ./scripts/fuzz.sh                    smoke: seeds + 20 s per target (CI)
#   ./scripts/fuzz.sh long               FUZZ_SECONDS (60) per target, corpus kept
#   FUZZ_SMOKE_SECONDS=5 ./scripts/fuzz.sh
#   FUZZ_TARGETS='test/fuzz/fuzz_hba' ./scripts/fuzz.sh long    a subset
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

mode=${1:-smoke}
case $mode in smoke | long) ;; *) echo "usage: $0 [smoke|long]" >&2; exit 2 ;; esac

pgv_deps_ensure fuzz || exit 2
build="$root/build-fuzz"
pgv_build "$build" --enable-fuzzing CC=clang-14 || exit 2
make -C "$build" -s "fuzz-$mode" ${FUZZ_TARGETS:+FUZZ_TARGETS="$FUZZ_TARGETS"} \
	${FUZZ_SECONDS:+FUZZ_SECONDS="$FUZZ_SECONDS"}
