"""Replay a run's recorded compile times through compile-ahead's ordering policies, offline: how long would the
test have waited with the cases taken in run order, with the pool's own order (ahead_policy.Order), and with a
clairvoyant order that knows every compile's time in advance (the best any estimate could do)? And with the
pool's order told each kind's (backend, dtype) mean compile time of the whole run from the start, what a
previous run of the same draw could tell it?

    python3 scripts/replay_ahead_order.py $OUT/examples.txt [--workers 7]   # scripts/gpu_validate.sh examples

It reads the progress lines of a `-v` run (`... verified (0.2 s, compiled ahead in 12.2 s; ...)`), one job per
example in run order, an unsupported one taking 1 s. What it leaves out, so read its numbers as a comparison of
orders, not a forecast: compile times do not change with how many compiles run beside them, each check takes
0.2 s, tests' own functions and shrinking are jobs like any other, and the pool's start-up is not counted.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_gemmguard.ahead.policy import Order

LINE = re.compile(
    r"gemmguard \[(\S+)\] \d+/\d+ (\w+) (\S+) (\S+) .*?: (verified|unsupported|known failure|FAILED)[^(]*"
    r"\(([\d.]+) s(?:, compiled ahead in ([\d.]+) s)?"
)


@dataclass(eq=False)
class Job:
    key: tuple
    kind: tuple
    seconds: float
    wanted: bool = False
    again: bool = False


def read(path: str) -> list[Job]:
    jobs = []
    for n, line in enumerate(Path(path).read_text(errors="replace").splitlines()):
        m = LINE.search(line)
        if m:
            backend, op, size, dtype, _, _, ahead = m.groups()
            jobs.append(Job((backend, (n, op, size, dtype), ""), (backend, dtype), float(ahead) if ahead else 1.0))
    return jobs


def replay(jobs: list[Job], policy: str, workers: int) -> tuple[float, float]:
    """(when the test ended, how long it waited in all) with `workers` compiling in `policy`'s order."""
    for job in jobs:  # what an earlier replay of the same jobs marked
        job.again = job.wanted = False
    order = Order(workers)
    if policy == "Order, told each kind's mean":  # what a previous run of the same draw could tell the pool
        for job in jobs:
            order.took[job.kind].append(job.seconds)
        for kind, times in order.took.items():
            order.took[kind] = [sum(times) / len(times)]
    queue = list(jobs)
    done_at: dict[int, float] = {}
    running: list[tuple[float, int]] = []  # (finish time, job index)
    index = {id(job): i for i, job in enumerate(jobs)}
    free_at = [0.0] * workers
    now = test = waited = 0.0
    need = 0
    while need < len(jobs):
        while running and running[0][0] <= now:  # compiles ended: the pool learns their times
            _, i = heapq.heappop(running)
            order.finish(jobs[i], jobs[i].seconds)
        for w in range(workers):
            if free_at[w] > now or not queue:
                continue
            for job in queue:
                job.wanted = index[id(job)] == need
            if policy == "run order":
                at = 0
            elif policy == "clairvoyant":
                at, least, ahead = 0, float("inf"), 0.0
                for k, job in enumerate(queue):
                    slack = -1.0 if job.wanted else ahead / workers - job.seconds
                    if slack < least:
                        at, least = k, slack
                    ahead += job.seconds
            else:
                at = order.next(queue) or 0
            job = queue.pop(at)
            order.start(job)
            i = index[id(job)]
            done_at[i] = free_at[w] = now + job.seconds
            heapq.heappush(running, (done_at[i], i))
        while need < len(jobs) and need in done_at and done_at[need] <= max(now, test):
            waited += max(0.0, done_at[need] - test)
            test = max(test, done_at[need]) + 0.2
            need += 1
        later = [t for t in (*free_at, test, done_at.get(need, 0.0)) if t > now]
        now = min(later, default=now + 0.01)
    return test, waited


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--workers", type=int, default=7)
    args = parser.parse_args()
    jobs = read(args.log)
    print(f"{len(jobs)} jobs, {sum(j.seconds for j in jobs):.0f} s of compiles, {args.workers} workers")
    for policy in ("run order", "ahead_policy.Order", "Order, told each kind's mean", "clairvoyant"):
        end, waited = replay(jobs, policy, args.workers)
        print(f"{policy:30s} the test ends at {end:6.1f} s, having waited {waited:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
