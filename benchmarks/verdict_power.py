"""How often `eval compare`'s verdict finds a difference of the planning table's size.

    python benchmarks/verdict_power.py [--runs 400] [--resamples 2000]

`binary_mde(n, changed)` is the smallest difference in greedy pass@1 that each of the
verdict's two tests (the paired bootstrap interval, the exact sign test) detects with 80%
power; the verdict asks both. This simulates pairs of 0/1 outcomes whose true difference
is that figure (a share `changed` of the problems flips, more of them up than down) and
prints the share of runs whose verdict reads "B better than A": the verdict's own power.
"""

from __future__ import annotations

import argparse

import numpy as np

from codea1.eval.compare import Metric, binary_mde, compare_metric

CELLS = [(100, 0.2), (100, 0.3), (48, 0.3), (378, 0.1)]  # (problems, share changing): docs/RESULTS.md's table


def power(n: int, changed: float, runs: int, resamples: int, rng: np.random.Generator) -> float:
    effect = binary_mde(n, changed) / 100.0        # pass@1 difference, as a share of problems
    p_up = (changed + effect) / (2 * changed)       # of the problems that flip, the share going up
    metric, hits = Metric("pass@1", binary=True), 0
    for _ in range(runs):
        a = rng.random(n) < 0.4
        flips, up = rng.random(n) < changed, rng.random(n) < p_up
        a[flips & up], a[flips & ~up] = False, True
        b = a.copy()
        b[flips] = ~a[flips]
        idx = rng.integers(0, n, size=(resamples, n))
        row = compare_metric(metric, {"pass@1": a * 100.0}, {"pass@1": b * 100.0}, idx)
        hits += row["verdict"].startswith("B better")
    return hits / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'problems':>8} {'changing':>8} {'mde (points)':>12} {'verdict power':>13}   ({args.runs} runs each)")
    for n, changed in CELLS:
        print(f"{n:>8} {changed:>8.0%} {binary_mde(n, changed):>12.1f} "
              f"{power(n, changed, args.runs, args.resamples, rng):>13.3f}")


if __name__ == "__main__":
    main()
