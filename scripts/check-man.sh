#!/usr/bin/env bash
#
# scripts/check-man.sh - fails when a setting of pgvalve's parameter table
# (src/base/config.c, params[]) has no entry in doc/pgvalve.ini.5: every name
# must appear on the tag line of a .TP paragraph of the SETTINGS section
# (.B name, or one of the names of a .BR list). And both man pages render
# at 80 columns without a warning of man(1) (groff's, such as "table wider
# than line width"). Run by `make check`; also by hand.
set -euo pipefail

src=${abs_top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
table="$src/src/base/config.c"
man="$src/doc/pgvalve.ini.5"

# P_STR(name, ...), P_INT_AUTO(name, ...) ... between "params[] = {" and "};"
names=$(sed -n '/^static const struct param_def params\[\] = {/,/^};/p' "$table" |
	grep -oE '^[[:space:]]*P_[A-Z_]+\([a-z0-9_]+' | sed 's/.*(//' | sort -u)
[ -n "$names" ] || { echo "check-man: no parameters found in $table" >&2; exit 1; }

# The tag lines of the SETTINGS section: the line after each .TP, with troff
# escapes and quotes dropped (a database key of the same name does not count).
tags=$(awk '/^\.SH / { in_settings = ($0 ~ /^\.SH "?SETTINGS"?$/) }
	in_settings && tp { print } { tp = 0 } in_settings && /^\.TP/ { tp = 1 }' "$man" |
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/"//g')

missing=0 count=0
for name in $names; do
	count=$((count + 1))
	if ! grep -Eq "(^|[ ,])$name([ ,]|\$)" <<<"$(sed 's/^\.B[RI]* //' <<<"$tags")"; then
		echo "check-man: $name (src/base/config.c) is not described in doc/pgvalve.ini.5" >&2
		missing=$((missing + 1))
	fi
done
echo "check-man: $count settings, $missing missing from doc/pgvalve.ini.5"

if command -v man >/dev/null 2>&1; then
	for page in "$src/doc/pgvalve.1" "$src/doc/pgvalve.ini.5"; do
		warnings=$(MANWIDTH=80 MAN_KEEP_FORMATTING= man --warnings -l "$page" 2>&1 >/dev/null || true)
		if [ -n "$warnings" ]; then
			echo "check-man: ${page#"$src"/} has warnings at 80 columns:" >&2
			printf '%s\n' "$warnings" >&2
			missing=$((missing + 1))
		else
			echo "check-man: ${page#"$src"/} renders at 80 columns without warnings"
		fi
	done
else
	echo "check-man: no man(1) here, rendering not checked (Debian package man-db)"
fi
[ "$missing" -eq 0 ]
