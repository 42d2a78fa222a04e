#!/usr/bin/env bash
#
# scripts/check-install.sh - `make install` (into a DESTDIR) puts pgvalve
# where doc/install.md's "Building and installing" says: the binary in
# $(bindir), the man pages, and the sample pgvalve.ini and userlist.txt in
# $(sysconfdir)/pgvalve/; a second install keeps an edited pgvalve.ini, and
# `make uninstall` removes only what is still the sample. Run by `make
# check` (Makefile.am passes the directories as pgv_*dir); also by hand
# from a build dir with those set.
set -euo pipefail

build=${abs_top_builddir:?run from make check (abs_top_builddir)}
src=${abs_top_srcdir:?run from make check (abs_top_srcdir)}
: "${pgv_bindir:?}" "${pgv_man1dir:?}" "${pgv_man5dir:?}" "${pgv_pkgsysconfdir:?}"

dest=$(mktemp -d "${TMPDIR:-/tmp}/pgvinstall.XXXXXX")
trap 'rm -rf "$dest"' EXIT
failed=0
expect() { # expect TEST WHAT
	if eval "$1"; then
		echo "check-install: $2"
	else
		echo "check-install: FAILED: $2" >&2
		failed=$((failed + 1))
	fi
}
quiet_make() {
	make -s -C "$build" "$@" DESTDIR="$dest" >"$dest.log" 2>&1 || { cat "$dest.log" >&2; rm -f "$dest.log"; exit 1; }
	rm -f "$dest.log"
}

quiet_make install
etc=$dest$pgv_pkgsysconfdir
expect '[ -x "$dest$pgv_bindir/pgvalve" ]' "pgvalve in $pgv_bindir"
expect '[ -f "$dest$pgv_man1dir/pgvalve.1" ] && [ -f "$dest$pgv_man5dir/pgvalve.ini.5" ]' "man pages in $pgv_man1dir, $pgv_man5dir"
expect 'cmp -s "$src/etc/pgvalve.ini" "$etc/pgvalve.ini"' "sample pgvalve.ini in $pgv_pkgsysconfdir"
expect 'cmp -s "$src/etc/userlist.txt" "$etc/userlist.txt"' "sample userlist.txt in $pgv_pkgsysconfdir"
# doc/install.md names that place: $(sysconfdir)/pgvalve.
expect 'grep -q "sysconfdir)/pgvalve/" "$src/doc/install.md"' "doc/install.md says \$(sysconfdir)/pgvalve/"

echo "listen_port = 7777 ; edited" >>"$etc/pgvalve.ini"
quiet_make install
expect 'grep -q "edited" "$etc/pgvalve.ini"' "a second make install keeps an edited pgvalve.ini"
quiet_make install-pgbouncer-name
expect '[ "$(readlink "$dest$pgv_bindir/pgbouncer")" = pgvalve ]' "make install-pgbouncer-name links pgbouncer to pgvalve"
quiet_make install-pgbouncer-name
expect '[ "$(readlink "$dest$pgv_bindir/pgbouncer")" = pgvalve ]' "a second make install-pgbouncer-name is harmless"
quiet_make uninstall
expect '[ ! -e "$dest$pgv_bindir/pgbouncer" ] && [ ! -L "$dest$pgv_bindir/pgbouncer" ]' "make uninstall removes the pgbouncer link"
quiet_make install
echo "a real PgBouncer" >"$dest$pgv_bindir/pgbouncer"
expect '! make -s -C "$build" install-pgbouncer-name DESTDIR="$dest" >/dev/null 2>&1' "make install-pgbouncer-name refuses to replace another pgbouncer"
expect '[ "$(cat "$dest$pgv_bindir/pgbouncer")" = "a real PgBouncer" ]' "... and leaves it as it was"
quiet_make uninstall
expect '[ "$(cat "$dest$pgv_bindir/pgbouncer")" = "a real PgBouncer" ]' "make uninstall leaves another pgbouncer alone"
rm -f "$dest$pgv_bindir/pgbouncer"
expect '[ -f "$etc/pgvalve.ini" ] && [ ! -e "$etc/userlist.txt" ]' "make uninstall keeps the edited pgvalve.ini, removes the untouched sample"
expect '[ ! -e "$dest$pgv_bindir/pgvalve" ]' "make uninstall removes the binary"

[ "$failed" -eq 0 ]
