#!/usr/bin/env bash
#
# scripts/check-docs.sh - fails when the documentation names a repository
# path or a make target that is not there, so that a moved file or a
# renamed target cannot leave README.md, doc/*.md or a script's usage
# header stale. Run by `make check`; also by hand. Each miss is named as
# FILE:LINE: what is missing.
#
# What it reads:
#   - README.md and doc/*.md: inline code (`...`, also across a line
#     break) and fenced code blocks; and the targets of relative links
#     ([text](ha.md#anchor), resolved from the page's folder);
#   - the usage header of scripts/*.sh and test/**/*.sh (the comment lines
#     at the top): every word for paths, inline code for make targets (the
#     prose there says "make" in English too).
# Paths: words starting with src/ test/ scripts/ doc/ etc/ debian/ m4/
# .ci/ (a leading ./ is dropped; an absolute path, or one following
# another word such as $root/ or ../, is not the repository's). One must
# exist in the source tree, or be a program that Makefile.am builds
# (test/unit/base/test_config, as TESTS= and run.sh name them). A pattern
# (* ? [ ], <name>, ...) must match at least one file; one of objects
# (*.o, *.a) is checked by its folder. build/ and build-*/ paths: build/X
# is checked as X when X is under src/ or test/ (a test binary, or a
# folder of the source tree); other build paths are what runs leave
# behind (test-suite.log, drivers/, difftest-failures/...) and are not
# checked.
# Make targets: the words after `make` (or `make -C DIR`) that are no
# option, no VAR=value and no shell expansion (after a # in a code block,
# the first only: English follows there): a rule of Makefile.am, a
# target automake makes (all, check, install, dist, clean, ...), or a
# program Makefile.am builds (make src/pgvalve).
#
# A self-test on a made-up page comes first (2 if its misses are not found
# exactly). CHECK_DOCS_VERBOSE=1 lists everything checked. Exits 0 when
# everything named is there, 1 when something is not; 77 (skipped) outside
# a git checkout: a release tarball holds only part of the tree the
# documentation names.
set -euo pipefail

src=${abs_top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
if [ ! -e "$src/.git" ]; then
	echo "check-docs: SKIP: $src is not a git checkout"
	exit 77
fi
command -v python3 >/dev/null || { echo "check-docs: python3 is missing" >&2; exit 2; }

checker=$(cat <<'EOF'
import glob, os, re, shlex, sys, tempfile

src = sys.argv[1]
os.chdir(src)

PATH_RE = re.compile(r'(?<![\w./$~@-])(?:\./)?(?:src|test|scripts|doc|etc|debian|m4|\.ci|build(?:-[a-z0-9]+)?)/[\w./*?<>\[\]@+%-]*')
BUILD_RE = re.compile(r'^build(?:-[a-z0-9]+)?/')
AUTOMAKE_TARGETS = set('''all check install install-strip install-exec install-data uninstall
    installcheck installdirs dist dist-gzip distcheck distclean clean mostlyclean maintainer-clean
    info html pdf dvi ps tags ctags cscope check-TESTS recheck'''.split())

def makefile_names():
    text = open('Makefile.am').read().replace('\\\n', ' ')
    targets, words = set(), set(text.split())
    for line in text.splitlines():
        m = re.match(r'^([A-Za-z0-9_.%/ -]+):(?!=)', line)
        if m:
            targets.update(m.group(1).split())
    # programs: extensionless src/ or test/ words of Makefile.am (check_PROGRAMS, FUZZ_TARGETS, ...)
    programs = {w for w in words if re.fullmatch(r'(?:src|test)/[\w/]+', w) and not w.endswith('/')}
    return targets | AUTOMAKE_TARGETS, programs

TARGETS, PROGRAMS = makefile_names()

def verbose(what):
    if os.environ.get('CHECK_DOCS_VERBOSE'):
        print('check-docs: checked ' + what)

def is_pattern(p):
    return bool(re.search(r'[*?\[]|<[^>]*>|\.\.\.', p))

def check_path(p):
    """None when p is fine (or not checked), else why not."""
    p = re.sub(r'^\./', '', p)
    p = re.sub(r'(?<!\.\.)[.,;:]+$', '', p)
    m = BUILD_RE.match(p)
    if m:
        rest = p[m.end():]
        if not re.match(r'(?:src|test)/', rest) or is_pattern(rest):
            return None   # what a run leaves in a build dir, not the source's
        if rest.rstrip('/') in PROGRAMS or os.path.exists(rest):
            return None
        return 'no program of Makefile.am nor file of the source tree: ' + rest
    if is_pattern(p):
        pat = re.sub(r'<[^>]*>|\.\.\.', '*', p)
        if re.search(r'\.(o|a)$', pat):
            pat = os.path.dirname(pat) + '/'
        if glob.glob(pat) or glob.glob(pat.rstrip('/')):
            return None
        return 'no file matches'
    if os.path.exists(p) or p.rstrip('/') in PROGRAMS:
        return None
    return 'no such file, nor a program of Makefile.am'

def make_words(words, first_only):
    """The targets among the words after one `make`."""
    out, j = [], 0
    while j < len(words):
        w = words[j]
        if not w:
            j += 1
            continue
        if w in (';', '&&', '||', '|', ')') or w[0] in '#>' or w.startswith('2>'):
            break
        if w in ('-C', '-f', '-I', '-o', '-W'):
            j += 2
            continue
        j += 1
        end = w[-1] in ';)'
        w = w.rstrip(';),')
        if w and w != '\\' and not w.startswith('-') and '=' not in w and not w.isdigit() \
                and not re.search(r'[$"\'{}`]', w):
            out.append(w)
            if first_only:
                break
        if end:
            break
    return out

def make_targets(code):
    """The targets of each make command in a piece of code. In a shell
    comment (after #) only the first word after make counts: English
    follows it there ("# or make cost-guard in any build dir")."""
    cut = re.search(r'(^|\s)#', code)
    parts = [(code[:cut.start()], False), (code[cut.end():], True)] if cut else [(code, False)]
    out = []
    for text, comment in parts:
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        for i, w in enumerate(words):
            if w in ('make', '$(MAKE)'):
                out += make_words(words[i + 1:], comment)
    return out

def check_target(t):
    if t in TARGETS or t in PROGRAMS:
        return None
    return 'no such make target in Makefile.am'

def split_code(s, n, open_span):
    """Cuts line n (text s) at its backticks: ([(line, kind, text)], the
    code span left open at its end). kind is 'code' for a code span (one
    opened on an earlier line, open_span, is joined to its end here) and
    'prose' for the rest."""
    out = []
    parts = s.split('`')
    in_code = open_span is not None
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if in_code:
            open_span = (open_span[0], open_span[1] + ' ' + part) if open_span else (n, part)
            if not last:
                out.append((open_span[0], 'code', open_span[1]))
                open_span = None
        else:
            out.append((n, 'prose', part))
        if not last:
            in_code = not in_code
    if in_code and open_span is None:
        open_span = (n, '')
    return out, open_span

def scan_md(path):
    """(line, kind, text) of a Markdown file: 'code' for code spans and
    fenced lines (a shell line continued with a backslash joined to the
    next), 'prose' for the rest."""
    fence = None
    open_span = None     # (line, text) of an inline code span still open
    cont = None          # (line, text) of a fenced line ending in a backslash
    for n, line in enumerate(open(path), 1):
        s = line.rstrip('\n')
        m = re.match(r'\s*(```+|~~~+)', s)
        if m and (fence is None or m.group(1)[0] == fence[0]):
            fence = None if fence else m.group(1)
            continue
        if fence:
            if cont:
                s = cont[1] + ' ' + s
                n = cont[0]
            cont = (n, s[:-1]) if s.endswith('\\') else None
            if not cont:
                yield n, 'code', s
            continue
        if not s.strip():
            open_span = None     # a code span does not cross a paragraph
            continue
        pieces, open_span = split_code(s, n, open_span)
        yield from pieces

def scan_sh(path):
    """(line, kind, text) of a script's usage header (the comment lines at
    its top): 'header' for each line, 'code' for its code spans."""
    open_span = None
    for n, line in enumerate(open(path), 1):
        s = line.rstrip('\n')
        if n == 1 and s.startswith('#!'):
            continue
        if not s.startswith('#'):
            return
        s = re.sub(r'^#+ ?', '', s)
        yield n, 'header', s
        pieces, open_span = split_code(s, n, open_span)
        yield from (p for p in pieces if p[1] == 'code')

def check_file(path, counts):
    errors = []
    scan = scan_md if path.endswith('.md') else scan_sh
    for n, kind, text in scan(path):
        if kind == 'header' or (kind == 'code' and path.endswith('.md')):
            for m in PATH_RE.finditer(text):
                counts['paths'] += 1
                why = check_path(m.group(0))
                verbose('%s:%d: path %s' % (path, n, m.group(0)))
                if why:
                    errors.append('%s:%d: %s: %s' % (path, n, m.group(0), why))
        if kind == 'code':
            for t in make_targets(text):
                counts['targets'] += 1
                why = check_target(t)
                verbose('%s:%d: make %s' % (path, n, t))
                if why:
                    errors.append('%s:%d: make %s: %s' % (path, n, t, why))
        if kind == 'prose' and path.endswith('.md'):
            for m in re.finditer(r'\]\(([^)\s]+)\)', text):
                target = m.group(1)
                if re.match(r'[a-z]+:|#', target):
                    continue
                counts['links'] += 1
                verbose('%s:%d: link %s' % (path, n, target))
                file = os.path.normpath(os.path.join(os.path.dirname(path), target.split('#')[0]))
                if not os.path.exists(file):
                    errors.append('%s:%d: link %s: no such file %s' % (path, n, target, file))
    return errors

# Self-test first: a page with two misses among things that are there must
# give exactly those two, so that a broken extraction cannot pass for clean
# documentation.
with tempfile.TemporaryDirectory() as tmp:
    page = os.path.join(tmp, 'selftest.md')
    with open(page, 'w') as f:
        f.write('Run `scripts/test.sh` or\n`make -C build\ncheck`, then `make no-such-target`.\n\n'
                '```sh\nbuild/test/unit/base/test_config   # and src/no_such_file.c\n```\n'
                'See [the guide](%s/doc/install.md#quick-start) and [this](nowhere.md).\n' % src)
    got = check_file(page, {'paths': 0, 'targets': 0, 'links': 0})
    want = ['%s:%d: %s' % (page, n, w) for n, w in
            ((3, 'make no-such-target: no such make target in Makefile.am'),
             (6, 'src/no_such_file.c: no such file, nor a program of Makefile.am'),
             (8, 'link nowhere.md: no such file %s/nowhere.md' % tmp))]
    if got != want:
        print('check-docs: self-test failed: got %r, want %r' % (got, want), file=sys.stderr)
        sys.exit(2)

files = ['README.md'] + sorted(glob.glob('doc/*.md')) + sorted(glob.glob('scripts/*.sh')) \
    + sorted(glob.glob('test/**/*.sh', recursive=True))
counts = {'paths': 0, 'targets': 0, 'links': 0}
errors = []
for f in files:
    errors += check_file(f, counts)
for e in errors:
    print('check-docs: ' + e, file=sys.stderr)
print('check-docs: %d files, %d paths, %d make targets, %d links; %d missing'
      % (len(files), counts['paths'], counts['targets'], counts['links'], len(errors)))
sys.exit(1 if errors else 0)
EOF
)

exec python3 -c "$checker" "$src"
