#!/usr/bin/env python3
"""difftest.py - the differential protocol test (issue 29): random but valid
frontend message sequences, run straight against PostgreSQL and through
pgvalve (pool_size = 1, several clients interleaved), must give each client
the same backend messages (normalize.py says what may differ), and a
client waiting for the server must get it as soon as it is free.

Run by `make difftest` / `make difftest-long` (test/difftest/run.sh), or by
hand: started without PGV_TEST_DIR it re-executes itself under
test/integration/run.sh, which provides the PostgreSQL cluster.

  difftest.py [--modes session,transaction,statement] [--seed N]
              [--sequences N] [--seconds S] [--exclude named,pipeline,...]
              [--replay FILE.json] [--keep-going]

Settings also come from the environment (DIFFTEST_SEED, DIFFTEST_MODES,
DIFFTEST_SEQUENCES, DIFFTEST_SECONDS, DIFFTEST_EXCLUDE, DIFFTEST_WAIT_MS,
DIFFTEST_INI_EXTRA, DIFFTEST_OUT, DIFFTEST_SHRINK_SECONDS). On a failure it
prints the seed, the smallest failing sequence it can find, the diff of the
message streams, and writes the sequence to DIFFTEST_OUT as JSON for
--replay. Exit: 0 all equal, 1 a failure, 99 the fixture failed.
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
    ap.add_argument("--shrink-wait-ms", type=int, default=int(env("DIFFTEST_SHRINK_WAIT_MS", "600")),
                    help="wait bound while shrinking (the failure is checked twice per candidate)")
    ap.add_argument("--max-failures", type=int, default=int(env("DIFFTEST_MAX_FAILURES", "4")),
                    help="distinct failures per mode before the mode stops")
    ap.add_argument("--keep-going", action="store_true", default=env("DIFFTEST_KEEP_GOING", "1") == "1")
    ap.add_argument("--replay", default=env("DIFFTEST_REPLAY", ""))
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
    return args


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
        c = self.cluster
        direct = runner.run_direct(program, c.socket, fixture.USER, DIRECT_BOUND)
        c.reset_tables(len(program["clients"]), DIRECT_BOUND)
        hang = None
        try:
            pooled = runner.run_pooled(program, self.pgv.address(), fixture.USER, fixture.PASSWORD,
                                       self.bound, stats)
        except runner.Hang as e:
            hang = {"kind": "hang", "summary": str(e), "details": ""}
        except (ConnectionError, TimeoutError, OSError) as e:
            hang = {"kind": "login", "summary": f"through pgvalve: {e}", "details": ""}
        if self.pgv.proc.poll() is not None:
            return {"kind": "crash", "summary": f"pgvalve exited ({self.pgv.proc.returncode})",
                    "details": self.pgv.log_tail()}
        if hang:
            return hang
        try:
            c.reset_tables(len(program["clients"]), DIRECT_BOUND)
        except RuntimeError as e:
            return {"kind": "leftover", "summary": f"after every client left: {e}", "details": ""}
        stats["backend_msgs"] += sum(len(x.stream) for x in pooled)
        stats["frontend_msgs"] += sum(x.frontend_msgs for x in pooled)
        return self.compare(direct, pooled)

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
                "details": "\n".join(diffs)}

    def fresh_run(self, program):
        """program on a pgvalve started afresh (shrinking, reproducing)."""
        self.pgv.restart()
        self.warm_up()
        stats = new_stats()
        return self.run_program(program, stats)

    def warm_up(self):
        """One client through the new pgvalve, so that logins need no server after it."""
        self.cluster.reset_tables(MAX_CLIENTS, DIRECT_BOUND)
        warm = {"seed": 0, "mode": self.pgv.mode, "clients": [[[["Q", "SELECT 1"]], [["X"]]]]}
        runner.run_pooled(warm, self.pgv.address(), fixture.USER, fixture.PASSWORD, DIRECT_BOUND, new_stats())

    # ---- failures
    def report(self, program, failure):
        mode, seed = program["mode"], program["seed"]
        say(f"\n==== FAIL [{mode} mode] seed {seed}: {failure['kind']}: {failure['summary']}")
        again = self.fresh_run(program)
        minimal, runs, final = program, 0, failure
        if again is None:
            say("  (does not fail on a fresh pgvalve: it depends on what earlier sequences left)")
        else:
            def fails(cand):
                # twice, so that a failure that comes and goes does not steer the shrinking
                return all((f := self.fresh_run(cand)) is not None and f["kind"] == failure["kind"]
                           for _ in range(2))
            # a pinned server stays pinned: shrinking need not wait the whole bound for it
            full, self.bound = self.bound, min(self.bound, self.args.shrink_wait_ms / 1000.0)
            try:
                shrunk, runs = shrink(program, fails, self.args.shrink_seconds, log=lambda s: None)
            finally:
                self.bound = full
            for _ in range(3):
                final = self.fresh_run(shrunk)
                if final is not None:
                    minimal = shrunk
                    break
            else:
                final = again
        path = self.save(minimal, seed)
        say(f"smallest failing sequence ({size(minimal)} of {size(program)} messages, {runs} shrinking runs):")
        say(grammar.describe_program(minimal))
        say(f"{final['kind']}: {final['summary']}")
        if final["details"]:
            say(final["details"])
        say(f"replay: test/difftest/run.sh --replay {path}")
        say(f"regenerate: DIFFTEST_MODES={mode} DIFFTEST_SEED={seed} DIFFTEST_SEQUENCES=1"
              + (f" DIFFTEST_EXCLUDE={','.join(sorted(self.args.exclude))}" if self.args.exclude else "")
              + " make -C build difftest")
        self.failures.append((mode, seed, final, minimal))
        return signature(final)

    def save(self, program, seed):
        build = os.environ.get("abs_top_builddir")
        out = self.args.out or os.path.join(build or self.cluster.dir, "difftest-failures")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, f"fail-{program['mode']}-{seed}.json")
        with open(path, "w") as f:
            json.dump(program, f, indent=1)
        return path

    # ---- modes
    def run_mode(self, mode, seconds):
        args = self.args
        self.pgv = fixture.Pgvalve(self.cluster, mode, args.ini_extra)
        self.pgv.start()
        stats = new_stats()
        seen = set()
        started = time.monotonic()
        try:
            self.warm_up()
            n = 0
            next_progress = time.monotonic() + PROGRESS_EVERY
            while n < args.sequences and time.monotonic() - started < seconds:
                if time.monotonic() > next_progress:
                    next_progress += PROGRESS_EVERY
                    say(f"difftest [{mode}]: {n} sequences, {stats['failed']} failed so far")
                program = grammar.generate(args.seed + n, mode, args.exclude, MAX_CLIENTS)
                n += 1
                stats["sequences"] += 1
                failure = self.run_program(program, stats)
                if failure is None:
                    continue
                stats["failed"] += 1
                if signature(failure) in seen:
                    say(f"---- [{mode} mode] seed {seed_of(program)}: the same failure again "
                          f"({failure['kind']}: {failure['summary'][:100]})")
                else:
                    elapsed = time.monotonic()
                    seen.add(signature(failure))
                    seen.add(self.report(program, failure))
                    started += time.monotonic() - elapsed      # shrinking is not in the budget
                if not args.keep_going or len(seen) >= args.max_failures:
                    break
                self.pgv.restart()
                self.warm_up()
            stats["seconds"] = time.monotonic() - started
            return stats
        finally:
            self.pgv.stop()
            report = self.pgv.sanitizer_report()
            if report:
                say(f"sanitizer report from pgvalve ({mode} mode):\n{report[-4000:]}")
                self.failures.append((mode, None, {"kind": "sanitizer"}, None))

    def replay(self, path):
        with open(path) as f:
            program = json.load(f)
        self.pgv = fixture.Pgvalve(self.cluster, program["mode"], self.args.ini_extra)
        self.pgv.start()
        try:
            self.warm_up()
            failure = self.run_program(program, new_stats())
            say(grammar.describe_program(program))
            if failure is None:
                say("replay: the streams are equal")
                return 0
            say(f"{failure['kind']}: {failure['summary']}\n{failure['details']}")
            return 1
        finally:
            self.pgv.stop()


def new_stats():
    return {"sequences": 0, "frontend_msgs": 0, "backend_msgs": 0, "contended": 0,
            "max_handover": 0.0, "seconds": 0.0, "failed": 0}


def seed_of(program):
    return program["seed"]


def signature(failure):
    """Failures with the same signature are reported (and shrunk) once per mode: a
    mismatch by its first differing lines, anything else by its kind."""
    if failure["kind"] != "mismatch":
        return (failure["kind"],)
    return (failure["kind"], re.sub(r"\d+", "#", failure["summary"])[:160])


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
    say(f"difftest: seed {args.seed}, modes {','.join(args.modes)}, up to {args.sequences} sequences "
          f"per mode in {args.seconds:.0f} s, excluded: {','.join(sorted(args.exclude)) or 'nothing'}")
    total = time.monotonic()
    lines = []
    for mode in args.modes:
        s = t.run_mode(mode, args.seconds / len(args.modes))
        lines.append(f"difftest [{mode}]: {s['sequences']} sequences, {s['frontend_msgs']} messages sent, "
                     f"{s['backend_msgs']} received through pgvalve, {s['contended']} waits for the server "
                     f"(longest hand-over {s['max_handover'] * 1000:.0f} ms), {s['failed']} failed, {s['seconds']:.1f} s")
        say(lines[-1])
    t.cluster.close()
    print()
    for line in lines:
        print(line)
    for mode, seed, failure, minimal in t.failures:
        print(f"FAILED [{mode}] seed {seed}: {failure['kind']}: {failure.get('summary', '')}")
    print(f"difftest: {len(t.failures)} failures in {time.monotonic() - total:.0f} s")
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
