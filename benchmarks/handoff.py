"""How Python's thread switch interval during a judge step changes the step's time.

The executor's driver threads need the interpreter lock to hand a worker its next job;
the judge's thread holds it while it parses test suites (see `codea1.interpreter`). This runs
the step of `benchmarks/judge_step.py` (32 MBPP+ problems, light tests) with several
`JudgeConfig.switch_interval_s` values, the steps interleaved (A B C A B C ...) in one
process so that the machine's noise falls on all of them alike, each after an untimed
step of 64 other problems (as in `judge_step.py`: the timed step's calls are not in the
workers' compile cache, as in training), and prints for each:

- the median seconds a step;
- how busy the workers were (share of worker time inside a run) from the start of the
  step until the last reference run returned, the phase in which the judge parses;
- the same over the whole step.

Usage: python benchmarks/handoff.py [--data ../shared/data/mbppplus.parquet] [--rounds 6]
       [--intervals default,0.002,0.001,0.0005] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_step import (  # noqa: E402
    DEFAULT_DATA, TimedExecutor, _swap_timeouts, build_rollouts, other_rollouts, prepare_flush, test_pools)

from codea1.data import load_problems  # noqa: E402
from codea1.judge import Judge, JudgeConfig  # noqa: E402
from codea1.sandbox import Executor, Limits  # noqa: E402


def busy_share(runs, start: float, end: float, workers: int) -> float:
    """Share of `workers` x [start, end] spent inside runs."""
    inside = sum(max(0.0, min(r.done_at, end) - max(r.done_at - r.wall_s, start)) for r in runs)
    return inside / (workers * (end - start)) if end > start else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=6, help="steps per setting (interleaved)")
    parser.add_argument("--intervals", default="default,0.002,0.001,0.0005",
                        help="comma-separated switch intervals in seconds; 'default' leaves Python's")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data}: MBPP+ parquet not found (pass --data)")
    settings: list[float | None] = []
    for text in args.intervals.split(","):
        text = text.strip()
        try:
            settings.append(None if text == "default" else float(text))
        except ValueError:
            sys.exit(f"--intervals: {text!r} is neither 'default' nor a number of seconds")
    workers = os.cpu_count() or 1
    limits = Limits()
    problems = load_problems(args.data)
    with Executor(workers=workers, limits=limits) as executor:
        pools = test_pools(problems, executor, 1.0)
        rollouts = build_rollouts(problems, pools, "light", random.Random(args.seed))
        others = other_rollouts(problems, pools, "light", rollouts, args.seed)
        recording = TimedExecutor(executor)
        judges = {s: Judge(recording, JudgeConfig(limits=limits, switch_interval_s=s)) for s in settings}
        swapped = _swap_timeouts(judges[settings[0]], rollouts)
        prepare_flush(judges[settings[0]], others)
        print(f"{len(rollouts)} problems, light tests, seed {args.seed}; {workers} workers; "
              f"candidates swapped for hanging: {swapped}; Python's default interval {sys.getswitchinterval() * 1e3:g} ms")
        stats: dict = {s: [] for s in settings}
        for _ in range(args.rounds):
            for s in settings:
                judges[s].judge_step(others)
                recording.runs.clear()
                t0 = time.perf_counter()
                judges[s].judge_step(rollouts)
                t1 = time.perf_counter()
                runs = list(recording.runs)
                last_reference = max((r.done_at for r in runs if r.reference), default=t0)
                stats[s].append((t1 - t0, busy_share(runs, t0, last_reference, workers),
                                 busy_share(runs, t0, t1, workers)))
    print()
    print("| switch interval | s/step (median) | workers busy while parsing | workers busy, whole step |")
    print("|---|---|---|---|")
    for s in settings:
        rows = stats[s]
        name = "Python's default" if s is None else f"{s * 1e3:g} ms"
        print(f"| {name} | {statistics.median(r[0] for r in rows):.3f} | "
              f"{100 * statistics.median(r[1] for r in rows):.0f}% | {100 * statistics.median(r[2] for r in rows):.0f}% |")
    print(f"({args.rounds} steps each, interleaved; load average at the end {os.getloadavg()[0]:.1f} on {workers} cores)")


if __name__ == "__main__":
    main()
