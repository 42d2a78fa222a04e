"""shrink.py - the smallest program that still fails the same way.

Greedy deletion: drop a whole client, then half of a client's steps, then a step, then one message of a
step, then one CopyData, keeping each deletion that leaves a valid program
(grammar.check_program) which still fails with the same kind of failure.
Starts over after every kept deletion, until none helps or the budget ends.
"""
import copy
import time

from grammar import check_program


def _candidates(program):
    clients = program["clients"]
    if len(clients) > 1:
        for i in range(len(clients)):
            p = copy.deepcopy(program)
            del p["clients"][i]
            yield p
    for i, steps in enumerate(clients):
        half = len(steps) // 2
        if half >= 2:
            for lo, hi in ((0, half), (half, len(steps))):
                p = copy.deepcopy(program)
                del p["clients"][i][lo:hi]
                yield p
    for i, steps in enumerate(clients):
        for s in range(len(steps)):
            p = copy.deepcopy(program)
            del p["clients"][i][s]
            yield p
    for i, steps in enumerate(clients):
        for s, step in enumerate(steps):
            for m in range(len(step)):
                if len(step) > 1:
                    p = copy.deepcopy(program)
                    del p["clients"][i][s][m]
                    yield p
                if step[m][0] == "COPYIN" and step[m][2]:
                    for d in range(len(step[m][2])):
                        p = copy.deepcopy(program)
                        del p["clients"][i][s][m][2][d]
                        yield p


def size(program):
    return sum(len(step) for steps in program["clients"] for step in steps)


def shrink(program, fails, budget_s, log=print):
    """fails(program) -> bool; returns (smallest failing program, runs made)."""
    deadline = time.monotonic() + budget_s
    best, runs = program, 0
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for cand in _candidates(best):
            if time.monotonic() >= deadline:
                log(f"shrink: budget of {budget_s} s used up")
                break
            if check_program(cand) is not None:
                continue
            runs += 1
            if fails(cand):
                best = cand
                improved = True
                log(f"shrink: {size(best)} messages")
                break
    return best, runs
