#!/usr/bin/env bash
#
# test/drivers/setup.sh BUILD_DIR - installs the pinned client drivers the
# driver matrix (test/integration/test_drivers) runs: a Python venv with
# psycopg 3 and asyncpg (requirements.txt), and node-postgres
# (package.json + package-lock.json), under BUILD_DIR/drivers. Does nothing
# when the installed pins already match. Exits non-zero if it cannot.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: setup.sh BUILD_DIR}
dest="$build/drivers"
mkdir -p "$dest"

if ! cmp -s "$here/requirements.txt" "$dest/venv/.requirements.txt" 2>/dev/null; then
	rm -rf "$dest/venv"
	python3 -m venv "$dest/venv"
	"$dest/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
	cp "$here/requirements.txt" "$dest/venv/.requirements.txt"
fi

if ! cmp -s "$here/package-lock.json" "$dest/node/package-lock.json" 2>/dev/null ||
	[ ! -d "$dest/node/node_modules/pg" ]; then
	rm -rf "$dest/node"
	mkdir -p "$dest/node"
	cp "$here/package.json" "$here/package-lock.json" "$dest/node/"
	(cd "$dest/node" && npm ci --silent --no-audit --no-fund)
fi
