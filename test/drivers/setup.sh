#!/usr/bin/env bash
#
# test/drivers/setup.sh BUILD_DIR - installs the pinned client drivers the
# driver matrix (test/integration/test_drivers) runs: a Python venv with
# psycopg 3 and asyncpg (requirements.txt), and node-postgres
# (package.json + package-lock.json), under BUILD_DIR/drivers. Does nothing
# when the installed pins already match. Exits non-zero if it cannot, with
# a last line that says why ("TLS certificate verification failed", "no
# network", ...) rather than pip's "No matching distribution".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: setup.sh BUILD_DIR}
dest="$build/drivers"
mkdir -p "$dest"

# probe_index: how the package index pip uses answers (pip itself only says
# "No matching distribution" when it cannot reach it): ok, tls, dns or net.
probe_index() {
	local url=${PIP_INDEX_URL:-}
	[ -n "$url" ] || url=$("$dest/venv/bin/pip" config get global.index-url 2>/dev/null) || url=https://pypi.org/simple/
	"$dest/venv/bin/python" - "$url" <<'EOF' 2>/dev/null || echo net
import socket, ssl, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
    print("ok")
except urllib.error.HTTPError:
    print("ok")
except urllib.error.URLError as e:
    if isinstance(e.reason, ssl.SSLCertVerificationError):
        print("tls")
    elif isinstance(e.reason, socket.gaierror):
        print("dns")
    else:
        print("net")
except ssl.SSLCertVerificationError:
    print("tls")
except OSError:
    print("net")
EOF
}

# explain TOOL LOG: the cause of a failed pip or npm run, from its output
# (and for pip, a look at the index itself).
explain() {
	local tool=$1 log=$2 cause=other why
	if grep -Eqi 'CERTIFICATE_VERIFY_FAILED|certificate verify failed|confirming the ssl certificate|UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_HAS_EXPIRED|ERR_TLS_CERT' "$log"; then
		cause=tls
	elif grep -Eqi 'Temporary failure in name resolution|Name or service not known|ENOTFOUND|EAI_AGAIN' "$log"; then
		cause=dns
	elif grep -Eqi 'Connection refused|ECONNREFUSED|Network is unreachable|ENETUNREACH|No route to host|EHOSTUNREACH|timed out|ETIMEDOUT|Failed to establish a new connection|ProxyError|ECONNRESET' "$log"; then
		cause=net
	elif grep -Eqi 'No space left on device|ENOSPC' "$log"; then
		cause=disk
	elif grep -Eqi 'No matching distribution|Could not find a version' "$log"; then
		cause=$(probe_index)
		[ "$cause" != ok ] || cause=missing
	elif grep -Eqi 'No matching version|ETARGET|E404|notarget' "$log"; then
		cause=missing
	fi
	case $cause in
	tls) why="TLS certificate verification failed (a proxy, or a CA certificate missing: see pip's cert and npm's cafile settings)" ;;
	dns) why="no network: the package index's host name does not resolve" ;;
	net) why="no network: the package index cannot be reached (connection refused, unreachable or timed out)" ;;
	disk) why="no space left on device" ;;
	missing) why="a pinned version is not on the package index" ;;
	*) why="see its output above" ;;
	esac
	echo "setup.sh: $tool could not install the pinned drivers: $why" >&2
}

# run TOOL LOG CMD...: runs CMD with its output in LOG; on failure shows the end of it and says why.
run() {
	local tool=$1 log=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		tail -n 20 "$log" >&2
		explain "$tool" "$log"
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
