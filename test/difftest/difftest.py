#!/usr/bin/env python3
"""difftest.py - the differential protocol test (issue 29): random but valid
frontend message sequences, run straight against PostgreSQL and through
pgvalve (pool_size = 1, several clients interleaved), must give each client
the same backend messages (normalize.py says what may differ), and a
client waiting for the server must get it as soon as it is free.

Run by `make difftest`, `make difftest-explore` and `make difftest-long`
(test/difftest/run.sh), or by
hand: started without PGV_TEST_DIR it re-executes itself under
test/integration/run.sh, which provides the PostgreSQL cluster.

  difftest.py [--modes session,transaction,statement] [--seed N]
              [--sequences N] [--seconds S] [--exclude named,pipeline,...]
              [--seeds-file FILE] [--replay FILE.json] [--no-corpus]
              (--help for the rest)

Settings also come from the environment (DIFFTEST_SEED, DIFFTEST_MODES,
DIFFTEST_SEQUENCES, DIFFTEST_SECONDS, DIFFTEST_EXCLUDE, DIFFTEST_WAIT_MS,
DIFFTEST_INI_EXTRA, DIFFTEST_OUT, DIFFTEST_SHRINK_SECONDS,
DIFFTEST_SEEDS_FILE, ...). Each mode first replays corpus/ (defects found
before), then runs sequences: with --seeds-file (`make difftest`, CI) the
fixed blocks of seeds.txt, every one of them, whatever the time, so that
a run's verdict depends on pgvalve alone; without it (`make
difftest-explore`) sequences from the seed on (the clock's when none is
given) until --sequences or --seconds runs out. On a failure it prints the seed, the smallest failing
sequence it can find, the diff of the message streams, and writes the
sequence to DIFFTEST_OUT as JSON for --replay; each distinct failure is
shrunk and reported once per mode (DIFFTEST_MAX_FAILURES of them, then the
mode stops). Exit: 0 all equal, 1 a failure, 99 the fixture failed.
"""
import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True      # nothing written into the source tree

import fixture  # noqa: E402
import grammar  # noqa: E402
import normalize  # noqa: E402
import runner  # noqa: E402
from shrink import shrink, size  # noqa: E402

MAX_CLIENTS = 4
# pgvalve's log line for a server it will not reuse after its client left
SERVER_NOT_IDLE = "client disconnected while the server was not idle"
PROGRESS_EVERY = 30     # seconds between progress lines
LIVE = None             # where progress goes: DIFFTEST_LIVE_FD (run.sh shows stdout only at the end)


def say(*parts):
    print(*parts, file=LIVE or sys.stdout, flush=True)
DIRECT_BOUND = 10.0     # PostgreSQL alone answers every step well within this


def parse_args(argv):
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default=env("DIFFTEST_MODES", "session,transaction,statement"))
    ap.add_argument("--seed", type=int, default=int(env("DIFFTEST_SEED", "0") or 0),
                    help="first seed (0: from the clock, printed)")
    ap.add_argument("--sequences", type=int, default=int(env("DIFFTEST_SEQUENCES", "3000")),
                    help="sequences per mode at most")
    ap.add_argument("--seconds", type=float, default=float(env("DIFFTEST_SECONDS", "100")),
                    help="time for all modes together, shrinking not counted")
    ap.add_argument("--exclude", default=env("DIFFTEST_EXCLUDE", ""),
                    help="features left out: " + ",".join(grammar.FEATURES))
    ap.add_argument("--wait-ms", type=int, default=int(env("DIFFTEST_WAIT_MS", "2000")),
                    help="longest wait for an answer through pgvalve")
    ap.add_argument("--ini-extra", default=env("DIFFTEST_INI_EXTRA", "").replace("\\n", "\n"))
    ap.add_argument("--out", default=env("DIFFTEST_OUT", ""))
    ap.add_argument("--shrink-seconds", type=float, default=float(env("DIFFTEST_SHRINK_SECONDS", "90")))
    ap.add_argument("--shrink-wait-ms", type=int, default=int(env("DIFFTEST_SHRINK_WAIT_MS", "1000")),
                    help="wait bound while shrinking (the failure is checked twice per candidate)")
    ap.add_argument("--max-failures", type=int, default=int(env("DIFFTEST_MAX_FAILURES", "3")),
                    help="distinct failures per mode before the mode stops")
    ap.add_argument("--stop-first", dest="keep_going", action="store_false",
                    default=env("DIFFTEST_KEEP_GOING", "1") == "1", help="stop a mode at its first failure")
    ap.add_argument("--seeds-file", default=env("DIFFTEST_SEEDS_FILE", ""),
                    help="run the seeds this file lists for each mode (seeds.txt), not --seed, "
                         "--sequences and --seconds")
    ap.add_argument("--replay", default=env("DIFFTEST_REPLAY", ""))
    ap.add_argument("--no-corpus", dest="corpus", action="store_false", default=env("DIFFTEST_CORPUS", "1") == "1",
                    help="skip the sequences of test/difftest/corpus/")
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in grammar.MODES:
            ap.error(f"unknown mode {m}")
    args.exclude = frozenset(f for f in args.exclude.split(",") if f)
    for f in args.exclude:
        if f not in grammar.FEATURES:
            ap.error(f"unknown feature {f}; known: {', '.join(grammar.FEATURES)}")
    if not args.seed:
        args.seed = int(time.time()) % 1000000 * 1000
    args.fixed = load_seeds(args.seeds_file, ap.error) if args.seeds_file else None
    return args


def load_seeds(path, error):
    """{mode: [seed, ...]} from a seeds file: lines "MODE FIRST COUNT", the COUNT seeds from
    FIRST on; "#" starts a comment."""
    fixed = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 3 or words[0] not in grammar.MODES or not all(w.isdigit() for w in words[1:]):
                error(f"{path}:{lineno}: not \"MODE FIRST COUNT\": {line.strip()}")
            first, count = int(words[1]), int(words[2])
            fixed.setdefault(words[0], []).extend(range(first, first + count))
    return fixed


def reexec_under_fixture(argv):
    """No cluster yet: run this script as run.sh's test program."""
    root = os.path.dirname(os.path.dirname(HERE))
    env = dict(os.environ)
    env["DIFFTEST_ARGV"] = json.dumps(argv)
    env.setdefault("abs_top_builddir", os.path.join(root, "build"))
    env.setdefault("PGV_TEST_BINARY_TIMEOUT", "86400")
    os.execve(os.path.join(root, "test/integration/run.sh"),
              ["run.sh", os.path.abspath(__file__)], env)


class Difftest:
    def __init__(self, args):
        self.args = args
        self.bound = args.wait_ms / 1000.0
        self.cluster = fixture.Cluster()
        self.pgv = None
        self.failures = []

    # ---- one program
    def run_program(self, program, stats):
        """None when equal, else a failure dict {kind, summary, details}."""
        c, n = self.cluster, tables_of(program)
        direct = runner.run_direct(program, c.socket, fixture.USER, DIRECT_BOUND)
        c.reset_tables(n, DIRECT_BOUND)
        pooled, failure = self.run_through_pgvalve(program, stats)
        if failure:
            return failure
        failure = self.compare(direct, pooled) or self.check_server_kept(pooled)
        try:
            c.reset_tables(n, DIRECT_BOUND)
        except RuntimeError as e:
            failure = failure or {"kind": "leftover", "summary": f"after every client left: {e}", "details": ""}
        return failure

    def run_through_pgvalve(self, program, stats):
        """The program through pgvalve, then a fence: one more client, which must be
        served once every client left; by then pgvalve has also decided about the
        server they left (check_server_kept). Returns (clients, failure)."""
        failure = None
        try:
            pooled = runner.run_pooled(program, self.pgv.address(), fixture.USER, fixture.PASSWORD,
                                       self.bound, stats)
            try:
                runner.run_pooled(fence(program["mode"]), self.pgv.address(), fixture.USER, fixture.PASSWORD,
                                  self.bound, new_stats())
            except runner.Hang as e:
                failure = {"kind": "hang-after", "details": "", "summary": "every client left, and a new one "
                           f"was not served: {e}"}
        except runner.Hang as e:
            failure = {"kind": "hang", "summary": str(e), "details": ""}
        except (ConnectionError, TimeoutError, OSError) as e:
            failure = {"kind": "login", "summary": f"through pgvalve: {e}", "details": ""}
        if self.pgv.proc.poll() is not None:
            failure = {"kind": "crash", "summary": f"pgvalve exited ({self.pgv.proc.returncode})",
                       "details": self.pgv.log_tail()}
        if failure:
            return None, failure
        stats["backend_msgs"] += sum(len(x.stream) for x in pooled)
        stats["frontend_msgs"] += sum(x.frontend_msgs for x in pooled)
        return pooled, None

    def check_server_kept(self, pooled):
        """A server every client left idle goes back to the pool, it is not closed."""
        closed = self.pgv.new_log_lines(SERVER_NOT_IDLE)
        if closed and all(x.left_clean for x in pooled):
            return {"kind": "server-closed", "details": "\n".join(closed),
                    "summary": "pgvalve closed its server although every client left it idle "
                               "(ReadyForQuery I, nothing pending)"}
        return None

    @staticmethod
    def compare(direct, pooled):
        diffs = []
        for d, p in zip(direct, pooled):
            a = normalize.login_lines(d.login) + ["-- logged in"] + [normalize.render(k, b) for k, b in d.stream]
            b = normalize.login_lines(p.login) + ["-- logged in"] + [normalize.render(k, b) for k, b in p.stream]
            text = normalize.diff(a, b)
            if text:
                diffs.append(f"client {d.idx}:\n{text}")
        if not diffs:
            return None
        first = diffs[0].split("\n")
        changed = [line for line in first if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        return {"kind": "mismatch", "summary": "streams differ: " + " / ".join(changed[:2]),
                "details": "\n".join(diffs), "changed": changed[:2]}

    def fresh_run(self, program):
        """program on a pgvalve started afresh (shrinking, reproducing)."""
        self.pgv.restart()
        self.warm_up()
        stats = new_stats()
        return self.run_program(program, stats)

    def warm_up(self):
        """One client through the new pgvalve, so that logins need no server after it."""
        self.cluster.reset_tables(MAX_CLIENTS, DIRECT_BOUND)
        runner.run_pooled(fence(self.pgv.mode), self.pgv.address(), fixture.USER, fixture.PASSWORD, DIRECT_BOUND, new_stats())

    # ---- failures
    def report(self, program, failure):
        """Prints a failure with the smallest program that still fails the same way on a
        fresh pgvalve, saves that program; returns the signature reported."""
        mode, seed = program["mode"], program["seed"]
        say(f"\n==== FAIL [{mode} mode] seed {seed}: {failure['kind']}: {failure['summary']}")
        minimal, runs, final = program, 0, failure
        again = self.fresh_run(program)
        if again is None:
            say("  (does not fail on a fresh pgvalve: it depends on what earlier sequences left)")
        else:
            if signature(again) != signature(failure):
                say(f"  (on a fresh pgvalve it fails otherwise: {again['kind']}: {again['summary']})")
            minimal, runs, final = self.shrink_failure(program, again)
        path = self.save(minimal, seed)
        say(f"smallest failing sequence ({size(minimal)} of {size(program)} messages, {runs} shrinking runs):")
        say(grammar.describe_program(minimal))
        say(f"{final['kind']}: {final['summary']}")
        if final["details"]:
            say(final["details"])
        say(f"replay: test/difftest/run.sh --replay {path}")
        say(f"regenerate: DIFFTEST_MODES={mode} DIFFTEST_SEED={seed} DIFFTEST_SEQUENCES=1"
            + (f" DIFFTEST_EXCLUDE={','.join(sorted(self.args.exclude))}" if self.args.exclude else "")
            + " make -C build difftest-explore")
        self.failures.append((mode, seed, final, path))
        return signature(final)

    def shrink_failure(self, program, reference):
        """(smallest program failing like reference, runs, its failure), each candidate
        on a fresh pgvalve and twice, so that a failure that comes and goes does not
        steer the shrinking."""
        def fails(cand):
            return all((f := self.fresh_run(cand)) is not None and signature(f) == signature(reference)
                       for _ in range(2))
        # a pinned server stays pinned: shrinking need not wait the whole bound for it
        full, self.bound = self.bound, min(self.bound, self.args.shrink_wait_ms / 1000.0)
        try:
            shrunk, runs = shrink(program, fails, self.args.shrink_seconds, log=lambda s: None)
        finally:
            self.bound = full
        for _ in range(3):
            final = self.fresh_run(shrunk)
            if final is not None and signature(final) == signature(reference):
                return shrunk, runs, final
        return program, runs, reference

    def run_corpus(self, mode, stats):
        """Replays corpus/ for mode; returns the signatures of its failures."""
        sigs = set()
        for name, program in load_corpus(mode, self.args.exclude):
            stats["corpus"] += 1
            failure = self.fresh_run(program)
            if failure is None:
                continue
            stats["corpus_failed"] += 1
            path = os.path.join(CORPUS, name)
            say(f"\n==== FAIL [{mode} mode] corpus {name}: {failure['kind']}: {failure['summary']}")
            say(f"expected: {program.get('note', '')}")
            say(grammar.describe_program(program))
            if failure["details"]:
                say(failure["details"])
            say(f"replay: test/difftest/run.sh --replay {path}")
            self.failures.append((mode, f"corpus/{name}", failure, None))
            sigs.add(signature(failure))
        return sigs

    def save(self, program, seed):
        build = os.environ.get("abs_top_builddir")
        out = self.args.out or os.path.join(build or self.cluster.dir, "difftest-failures")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, f"fail-{program['mode']}-{seed}.json")
        with open(path, "w") as f:
            f.write(grammar.dump_program(program))
        return path

    # ---- modes
    def run_mode(self, mode, seconds):
        args = self.args
        self.pgv = fixture.Pgvalve(self.cluster, mode, args.ini_extra)
        self.pgv.start()
        stats = new_stats()
        seen = {}       # signature -> how many times
        reported = 0
        started = time.monotonic()
        try:
            if args.corpus:
                # defects the corpus showed already are counted below, not shrunk again
                seen.update((sig, 1) for sig in self.run_corpus(mode, stats))
                self.pgv.restart()
            self.warm_up()
            started = time.monotonic()
            n = 0
            next_progress = time.monotonic() + PROGRESS_EVERY
            for seed in self.seeds(mode):
                if args.fixed is None and (n >= args.sequences or time.monotonic() - started >= seconds):
                    break
                if time.monotonic() > next_progress:
                    next_progress += PROGRESS_EVERY
                    say(f"difftest [{mode}]: {n} sequences, {stats['failed']} failed so far")
                program = grammar.generate(seed, mode, args.exclude, MAX_CLIENTS)
                n += 1
                stats["sequences"] += 1
                failure = self.run_program(program, stats)
                if failure is None:
                    continue
                stats["failed"] += 1
                sig = signature(failure)
                seen[sig] = seen.get(sig, 0) + 1
                if seen[sig] == 1:
                    reported += 1
                    elapsed = time.monotonic()
                    final_sig = self.report(program, failure)
                    seen[final_sig] = max(seen.get(final_sig, 0), 1)
                    started += time.monotonic() - elapsed      # shrinking is not in the budget
                elif seen[sig] <= 3:
                    say(f"---- [{mode} mode] seed {seed_of(program)}: the same failure again "
                        f"({failure['kind']}: {failure['summary'][:100]})")
                if not args.keep_going or reported >= args.max_failures:
                    break
                self.pgv.restart()
                self.warm_up()
            stats["seconds"] = time.monotonic() - started
            return stats
        finally:
            self.pgv.stop()
            for report in self.pgv.sanitizer_reports:
                say(f"sanitizer report from pgvalve ({mode} mode):\n{report[-4000:]}")
                self.failures.append((mode, "pgvalve's stderr", {"kind": "sanitizer", "summary": report[:200]}, None))

    def seeds(self, mode):
        """The seeds of mode's sequences: seeds.txt's, or the seed on and on."""
        if self.args.fixed is not None:
            yield from self.args.fixed.get(mode, [])
            return
        n = 0
        while True:
            yield self.args.seed + n
            n += 1

    def replay(self, path):
        """Runs a saved program (every mode a corpus file names) on a fresh pgvalve."""
        with open(path) as f:
            saved = json.load(f)
        say(grammar.describe_program(saved))
        if saved.get("note"):
            say(f"expected: {saved['note']}")
        status = 0
        for mode in saved.get("modes", [saved["mode"]]):
            program = dict(saved, mode=mode)
            self.pgv = fixture.Pgvalve(self.cluster, mode, self.args.ini_extra)
            self.pgv.start()
            try:
                self.warm_up()
                failure = self.run_program(program, new_stats())
            finally:
                self.pgv.stop()
            if failure is None:
                say(f"replay [{mode} mode]: the streams are equal")
            else:
                say(f"replay [{mode} mode]: {failure['kind']}: {failure['summary']}\n{failure['details']}")
                status = 1
        return status


CORPUS = os.path.join(HERE, "corpus")


def load_corpus(mode, exclude):
    """(file name, program) of test/difftest/corpus/ for mode: the smallest sequences of
    defects found so far, run first by every run. A file names its "modes" and the
    features it "needs" (DIFFTEST_EXCLUDE skips it), and says in "note" what
    PostgreSQL answers."""
    out = []
    names = sorted(os.listdir(CORPUS)) if os.path.isdir(CORPUS) else []
    for name in names:
        if not name.endswith(".json"):
            continue
        with open(os.path.join(CORPUS, name)) as f:
            program = json.load(f)
        if mode in program.get("modes", [program["mode"]]) and not set(program.get("needs", [])) & exclude:
            program = dict(program, mode=mode)
            why = grammar.check_program(program)
            if why:
                raise ValueError(f"corpus/{name} is not valid in {mode} mode: {why}")
            out.append((name, program))
    return out


def tables_of(program):
    """How many client tables (dt_0, dt_1, ...) to reset: shrinking keeps a client's table."""
    used = [int(n) for n in re.findall(r"dt_(\d+)", json.dumps(program))]
    return max(used) + 1 if used else 0


def fence(mode):
    return {"seed": 0, "mode": mode, "clients": [[[["Q", "SELECT 1"]], [["X"]]]]}


def new_stats():
    return {"sequences": 0, "corpus": 0, "corpus_failed": 0, "frontend_msgs": 0, "backend_msgs": 0, "contended": 0,
            "max_handover": 0.0, "seconds": 0.0, "failed": 0}


def seed_of(program):
    return program["seed"]


def signature(failure):
    """What makes two failures the same defect: their kind, and for a mismatch the
    first two differing lines as side, message type and SQLSTATE (so not the
    names or positions in them). A defect is reported (and shrunk) once per
    mode, and shrinking keeps the signature."""
    if failure["kind"] != "mismatch":
        return (failure["kind"],)
    sig = []
    for line in failure["changed"]:
        code = re.search(r"C='(\w+)'", line)
        sig.append(line[:3].strip() + (" " + code.group(1) if code and line[1:2] in "EN" else ""))
    return (failure["kind"],) + tuple(sig)


def open_live():
    global LIVE
    fd = os.environ.get("DIFFTEST_LIVE_FD")
    if fd:
        try:
            LIVE = os.fdopen(int(fd), "w", buffering=1)
        except (OSError, ValueError):
            LIVE = None


def main():
    open_live()
    argv = json.loads(os.environ.get("DIFFTEST_ARGV", "null")) or sys.argv[1:]
    args = parse_args(argv)
    if "PGV_TEST_DIR" not in os.environ:
        reexec_under_fixture(argv)
    t = Difftest(args)
    try:
        t.cluster.open_admin(DIRECT_BOUND)
        t.cluster.create_tables(MAX_CLIENTS, grammar.TABLE_ROWS, DIRECT_BOUND)
        t.cluster.reset_tables(MAX_CLIENTS, DIRECT_BOUND)
    except Exception as e:
        say(f"difftest: the fixture failed: {e}")
        return 99
    if args.replay:
        return t.replay(args.replay)
    excluded = ','.join(sorted(args.exclude)) or 'nothing'
    if args.fixed is not None:
        say(f"difftest: the fixed seeds of {args.seeds_file} ("
            + ", ".join(f"{len(args.fixed.get(m, []))} {m}" for m in args.modes) + f"), excluded: {excluded}")
    else:
        say(f"difftest: seed {args.seed}, modes {','.join(args.modes)}, up to {args.sequences} sequences "
            f"per mode in {args.seconds:.0f} s, excluded: {excluded}")
    total = time.monotonic()
    lines = []
    for mode in args.modes:
        s = t.run_mode(mode, args.seconds / len(args.modes))
        lines.append(f"difftest [{mode}]: corpus {s['corpus'] - s['corpus_failed']}/{s['corpus']} passed; "
                     f"{s['sequences']} sequences, {s['frontend_msgs']} messages sent, "
                     f"{s['backend_msgs']} received through pgvalve, {s['contended']} waits for the server "
                     f"(longest hand-over {s['max_handover'] * 1000:.0f} ms), {s['failed']} failed, {s['seconds']:.1f} s")
        say(lines[-1])
    t.cluster.close()
    print()
    for line in lines:
        print(line)
    for mode, seed, failure, path in t.failures:
        what = seed if isinstance(seed, str) else f"seed {seed}"
        print(f"FAILED [{mode}] {what}: {failure['kind']}: {failure.get('summary', '')}"
              + (f"\n    replay: test/difftest/run.sh --replay {path}" if path else ""))
    found = [(mode, seed, path) for mode, seed, _, path in t.failures if path]
    if found:
        print("\nEach failure above, once understood and fixed, goes into the corpus, which every run "
              "replays first: copy its sequence there under a name that says what it shows, and add "
              '"modes", "needs" and "note" (what PostgreSQL answers):')
        for mode, seed, path in found:
            print(f"    [{mode}] seed {seed}: cp {path} test/difftest/corpus/<what-it-shows>.json")
    print(f"difftest: {len(t.failures)} failures in {time.monotonic() - total:.0f} s")
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
