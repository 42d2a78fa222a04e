#!/usr/bin/env bash
#
# test/drivers/setup.sh BUILD_DIR - installs the pinned client drivers the
# driver matrix (test/integration/test_drivers) runs: a Python venv with
# psycopg 3 and asyncpg (requirements.txt), node-postgres
# (package.json + package-lock.json), and pgJDBC (pom.xml, copied from Maven
# Central into BUILD_DIR/drivers/java), under BUILD_DIR/drivers. Does nothing
# when the installed pins already match. Exits non-zero if it cannot, with
# a last line that says why ("TLS certificate verification failed", "no
# network", ...) rather than pip's "No matching distribution".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/deps.sh
. "$here/../../scripts/deps.sh"
build=${1:?usage: setup.sh BUILD_DIR}
dest="$build/drivers"
mkdir -p "$dest"

# run TOOL LOG CMD...: runs CMD with its output in LOG; on failure shows the end of it and says why.
run() {
	local tool=$1 log=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		tail -n 20 "$log" >&2
		echo "setup.sh: $tool could not install the pinned drivers: $(pgv_install_failure_cause "$log" "$dest/venv/bin")" >&2
		return 1
	fi
}

if ! cmp -s "$here/requirements.txt" "$dest/venv/.requirements.txt" 2>/dev/null; then
	rm -rf "$dest/venv"
	run venv "$dest/venv.log" python3 -m venv "$dest/venv"
	run pip "$dest/pip.log" "$dest/venv/bin/pip" install --disable-pip-version-check -r "$here/requirements.txt"
	cp "$here/requirements.txt" "$dest/venv/.requirements.txt"
fi

if ! cmp -s "$here/package-lock.json" "$dest/node/package-lock.json" 2>/dev/null ||
	[ ! -d "$dest/node/node_modules/pg" ]; then
	rm -rf "$dest/node"
	mkdir -p "$dest/node"
	cp "$here/package.json" "$here/package-lock.json" "$dest/node/"
	run npm "$dest/npm.log" bash -c 'cd "$1" && npm ci --no-audit --no-fund' npm "$dest/node"
fi

if ! cmp -s "$here/pom.xml" "$dest/java/.pom.xml" 2>/dev/null; then
	rm -rf "$dest/java"
	run mvn "$dest/mvn.log" mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$dest/java" -DincludeScope=runtime
	cp "$here/pom.xml" "$dest/java/.pom.xml"
fi
