#!/usr/bin/env bash
#
# scripts/check-layers.sh - keeps pgvalve's layers honest (README,
# "Architecture"): reads which compiled object calls which from their
# symbol tables and fails when
#
#   - a file calls a file of a higher layer (base < core < feature < process),
#   - files call each other in a circle anywhere but inside the core,
#   - an object is in no layer (a new file must be placed in LAYERS below).
#
# Every offending call is named: the calling file and function, and the
# function it calls with the file that defines it.
#
#   scripts/check-layers.sh [OBJDIR]     OBJDIR: where src/*.o are (default: the
#                                        build dir `make check` names, else build/src)
#
# Needs nm and objdump (binutils) and python3. Exits 0 when the layers hold,
# 1 when they do not, 2 on a usage or tool error.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
objdir=${1:-${abs_top_builddir:+$abs_top_builddir/src}}
objdir=${objdir:-$root/build/src}
[ -d "$objdir" ] || { echo "check-layers: no object directory $objdir (build first)" >&2; exit 2; }
for tool in nm objdump python3; do
	command -v "$tool" >/dev/null || { echo "check-layers: $tool is missing" >&2; exit 2; }
done

# The layers, lowest first: a file may call its own layer and those below.
# Only the core's files may call each other in a circle.
LAYERS='
base:    log util instance reap tcp cancel_key metrics_record config auth_file hba gss_auth crypto scram scram_cache
         proto varcache netbuf dns ldap_auth tls pgoptions sql_lex sql_classify stats workers sdnotify
core:    client server server_internal pool auth
feature: prepare session_set roles balance volatility notify replication peer admin admin_control admin_fanout admin_merge admin_show admin_reply admin_state users metrics metrics_http
         reload listener shutdown drain readiness shared_pool handover
process: loop janitor supervisor main
'

export LAYERS
checker=$(cat <<'EOF'
import collections, glob, os, re, subprocess, sys

objdir = sys.argv[1]
layer_of, order = {}, []
for block in re.split(r'\n(?=\w+:)', os.environ['LAYERS'].strip()):
    name, files = block.split(':', 1)
    order.append(name)
    for f in files.split():
        layer_of[f] = len(order) - 1
core = order.index('core')

objs = sorted(glob.glob(os.path.join(objdir, '*.o')))
objs = [o for o in objs if not os.path.basename(o).startswith('libpgvalve')]
if not objs:
    sys.exit('check-layers: no objects in %s' % objdir)

def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(2)
    return r.stdout

defined, calls = {}, collections.defaultdict(set)   # calls[file] = {(caller, callee)}
for o in objs:
    f = os.path.basename(o)[:-2].replace('src_pgvalve-', '').replace('src_libpgvalve_a-', '')
    for line in run('nm', o).splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBRCG':
            defined[p[2]] = f
    # who refers to what: relocations inside each function (objdump -dr), then data relocations
    func = '?'
    for line in run('objdump', '-dr', '--no-show-raw-insn', o).splitlines():
        m = re.match(r'^[0-9a-f]+ <([^>]+)>:$', line)
        if m:
            func = m.group(1)
            continue
        m = re.search(r'\sR_\w+\s+([A-Za-z_][\w.]*)', line)
        if m:
            calls[f].add((func, m.group(1)))
    # tables of function pointers (an ops table naming another file's function) count as calls too
    section = None
    for line in run('objdump', '-r', o).splitlines():
        m = re.match(r'^RELOCATION RECORDS FOR \[([^\]]+)\]:', line)
        if m:
            section = m.group(1)
            continue
        if not section or section.startswith(('.text', '.debug', '.eh_frame', '.rela')):
            continue
        p = line.split()
        if len(p) >= 3 and re.match(r'^[0-9a-f]+$', p[0]):
            calls[f].add(('(data in %s)' % section, re.split(r'[-+]', p[2])[0]))

files = sorted(calls.keys() | {os.path.basename(o)[:-2] for o in objs})
edges = collections.defaultdict(lambda: collections.defaultdict(set))
for f in files:
    for caller, sym in calls.get(f, ()):
        t = defined.get(sym)
        if t and t != f:
            edges[f][t].add((caller, sym))

problems = []
unplaced = [f for f in files if f not in layer_of]
for f in unplaced:
    problems.append('%s.c is in no layer: add it to LAYERS in scripts/check-layers.sh' % f)

def show(f, t, why):
    for caller, sym in sorted(edges[f][t]):
        problems.append('src/%s.c: %s() calls %s() of src/%s.c: %s' % (f, caller, sym, t, why))

for f in files:
    for t in edges[f]:
        if f in layer_of and t in layer_of and layer_of[t] > layer_of[f]:
            show(f, t, 'the %s layer may not call the %s layer' % (order[layer_of[f]], order[layer_of[t]]))

# strongly connected components (Tarjan, iterative)
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
def strongconnect(v):
    work = [(v, iter(sorted(edges[v])))]
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
    while work:
        node, it = work[-1]
        advanced = False
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(edges[w]))))
                advanced = True
                break
            elif w in on:
                low[node] = min(low[node], index[w])
        if advanced:
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == node:
                    break
            comps.append(sorted(comp))
for v in files:
    if v not in index:
        strongconnect(v)

core_files = sorted(f for f in files if layer_of.get(f) == core)
for comp in comps:
    if len(comp) < 2 or all(layer_of.get(f) == core for f in comp):
        continue
    for f in comp:
        for t in comp:
            if t in edges[f] and not (layer_of.get(f) == core and layer_of.get(t) == core):
                show(f, t, 'files that call each other in a circle: %s' % ' '.join(comp))

circle = next((c for c in comps if len(c) > 1 and all(layer_of.get(f) == core for f in c)), [])
print('check-layers: %d objects; core circle: %s (declared core: %s)' %
      (len(files), ' '.join(circle) or '-', ' '.join(core_files)))
if problems:
    for p in sorted(set(problems)):
        print('check-layers: ' + p)
    print('check-layers: FAILED, %d problems' % len(set(problems)))
    sys.exit(1)
print('check-layers: OK')
EOF
)

# Self-test first: a checker that cannot see a planted violation proves nothing.
selftest=$(mktemp -d)
trap 'rm -rf "$selftest"' EXIT
cat >"$selftest/client.c" <<'C'
void client_close(void) {}
void pool_release(void);
void client_uses_pool(void) { pool_release(); }
C
cat >"$selftest/pool.c" <<'C'
void client_close(void);
void pool_release(void) { client_close(); }
C
cat >"$selftest/util.c" <<'C'
void client_close(void);
void util_calls_up(void) { client_close(); }
C
cat >"$selftest/admin.c" <<'C'
void metrics_collect(void);
void admin_show(void) { metrics_collect(); }
C
cat >"$selftest/metrics.c" <<'C'
void admin_show(void);
void metrics_collect(void) { admin_show(); }
C
for f in client pool util admin metrics; do
	${CC:-cc} -c -O0 -o "$selftest/$f.o" "$selftest/$f.c" || { echo "check-layers: cannot compile the self-test" >&2; exit 2; }
done
out=$(python3 -c "$checker" "$selftest" 2>&1) && st=0 || st=$?
if [ "$st" -ne 1 ] ||
	! grep -q 'src/util.c: util_calls_up() calls client_close() of src/client.c: the base layer may not call the core layer' <<<"$out" ||
	! grep -q 'src/admin.c: admin_show() calls metrics_collect() of src/metrics.c: files that call each other in a circle: admin metrics' <<<"$out" ||
	grep -q 'src/pool.c: pool_release() calls client_close()' <<<"$out"; then
	echo "check-layers: the self-test did not get the expected verdict:" >&2
	echo "$out" >&2
	exit 2
fi

python3 -c "$checker" "$objdir"
