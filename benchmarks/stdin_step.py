"""Seconds per judge step of paper shape on standard-input problems (`python
benchmarks/judge_step.py --stdin`, or this file directly).

A step: the 25 bundled stdin problems x 8 candidates x 8 suites x 8 input/output tests,
plus 8 Mistake Book tests a problem. Candidates: the reference (twice: as written and with
a comment, one run for both), the problem's naive program (three times, sampled programs
repeat), a program that does not compile, one that raises before reading, one that prints
an extra line. Test inputs are the golden inputs and variants with one digit changed
(most still valid; the others make the reference fail, as a test model's bad inputs do),
outputs right, or wrong in one suite of four; each suite repeats one of its tests.
Every input of a candidate is a fork of its own; the report gives the step's seconds, the
program runs (one per input) a second, and the share of candidate time spent per fork.

Usage: python benchmarks/stdin_step.py [--steps 3] [--seed 0] [--workers N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from codea1.data import bundled_problems
from codea1.data.stdin_io import golden_io_tests, io_test
from codea1.judge import JudgeConfig, ProblemRollout
from codea1.judge.stdin import StdinJudge
from codea1.sandbox import Executor


def _variant(text: str, rng: random.Random) -> str:
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    if not digits:
        return text
    i = rng.choice(digits)
    return text[:i] + str(rng.randrange(10)) + text[i + 1:]


def _suite(inputs: list[str], outputs: dict[str, str], rng: random.Random, wrong: bool) -> str:
    chosen = rng.sample(inputs, min(7, len(inputs)))
    chosen.append(chosen[0])  # a duplicate
    blocks = []
    for inp in chosen:
        out = outputs.get(inp, "0\n")
        if wrong and rng.random() < 0.3:
            out = "12345\n"
        blocks.append(f"```input\n{inp}```\n```output\n{out}```")
    return "\n".join(blocks)


def build_step(seed: int) -> list[ProblemRollout]:
    rng = random.Random(seed)
    rollouts = []
    for p in bundled_problems("stdin:all"):
        golden = golden_io_tests(p)
        outputs = {t.input: t.output for t in golden}
        inputs = list(dict.fromkeys([t.input for t in golden] + [_variant(t.input, rng) for t in golden for _ in range(6)]))
        codes = [p.reference, "# the same program\n" + p.reference, p.meta["naive"], p.meta["naive"], p.meta["naive"],
                 p.reference.replace(":", "", 1) if ":" in p.reference else "(", "raise ValueError('no')\n",
                 p.reference + "print()\n"]
        suites = [[_suite(inputs, outputs, rng, wrong=(j % 4 == 3)) for j in range(8)] for _ in codes]
        mistakes = [io_test(t.input, t.output) for t in golden][:8]
        rollouts.append(ProblemRollout(p, [f"```python\n{c}```" for c in codes], suites, mistakes))
    return rollouts


class _Counting:
    """The executor, counting the program runs (one per input) each job asks for."""

    def __init__(self, inner) -> None:
        self.inner, self.forks = inner, 0

    def submit(self, job, priority: float = 0.0):
        self.forks += len(job.calls)
        return self.inner.submit(job, priority=priority)

    def run_many(self, jobs):
        self.forks += sum(len(j.calls) for j in jobs)
        return self.inner.run_many(jobs)


def main(steps: int = 3, seed: int = 0, workers: int | None = None) -> None:
    with Executor(workers=workers) as ex:
        counting = _Counting(ex)
        judge = StdinJudge(counting, JudgeConfig(suite_size=8))
        judge.judge_step(build_step(seed + 1000))  # warm-up
        times, forks, timeouts = [], [], []
        for step in range(steps):
            rollouts = build_step(seed + step)
            counting.forks = 0
            start = time.perf_counter()
            results = judge.judge_step(rollouts)
            times.append(time.perf_counter() - start)
            forks.append(counting.forks)
            assert all(r.usable for r in results), [r.reference_error or r.infra_error for r in results if not r.usable]
            timeouts.append(len({(r.problem_id, t.call) for r in results for row in r.suites for s in row
                                 for t in s.tests if (t.failure or "").startswith("timeout")
                                 or (t.reason or "").startswith("reference: timeout")}))
        print(f"stdin judge step: {len(rollouts)} problems x 8 candidates x 8 suites x 8 tests, "
              f"{ex.n_workers} workers")
        print(f"  seconds a step: median {statistics.median(times):.2f} (min {min(times):.2f}, max {max(times):.2f})")
        print(f"  program runs (forks, one per input) a step: {statistics.median(forks):.0f}, "
              f"{statistics.median(f / t for f, t in zip(forks, times)):.0f} a second; "
              f"inputs that timed out (reference or candidate: a time limit each): {statistics.median(timeouts):.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    main(args.steps, args.seed, args.workers)
