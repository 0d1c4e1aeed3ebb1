"""Throughput of the sandboxed executor vs a process-per-run baseline, side by side.

Each run is a short program: a function plus ~10 asserts (the judge's normal shape).
The executor runs them on its warm fork-server workers; the baseline starts a fresh
``python3 -I`` per run with ``subprocess`` (as many in parallel as there are workers).
Targets on the 2-core development machine: >= 800 runs/s and >= 8x the baseline.

The two sides are timed in alternating rounds, and a target verdict is printed only when
every run of every side succeeded (else NO VERDICT and exit status 1).

    python benchmarks/sandbox_throughput.py [--runs N] [--baseline-runs N] [--rounds R] [--workers W]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from codea1.sandbox import Executor, Job

PROGRAM = """
def is_palindrome(s):
    s = ''.join(c.lower() for c in s if c.isalnum())
    return s == s[::-1]

assert is_palindrome("A man, a plan, a canal: Panama")
assert is_palindrome("racecar")
assert not is_palindrome("hello")
assert is_palindrome("")
assert is_palindrome("a")
assert not is_palindrome("ab")
assert is_palindrome("No 'x' in Nixon")
assert is_palindrome("12321")
assert not is_palindrome("12345")
assert is_palindrome("Was it a car or a cat I saw?")
"""


def executor_jobs(runs: int, calls_mode: bool) -> list[Job]:
    if calls_mode:
        body, _, _ = PROGRAM.partition("\nassert ")
        calls = [f'is_palindrome("{w}")' for w in ("racecar", "hello", "", "a", "ab", "12321",
                                                    "12345", "noon", "abcba", "xyz")]
        return [Job(program=body, calls=calls) for _ in range(runs)]
    return [Job(program=PROGRAM) for _ in range(runs)]


def bench_executor(ex: Executor, runs: int, calls_mode: bool) -> tuple[float, int]:
    """(seconds, runs that succeeded: status ok, program ok, every call ok)."""
    jobs = executor_jobs(runs, calls_mode)
    t = time.perf_counter()
    results = ex.run_many(jobs)
    dt = time.perf_counter() - t
    good = sum(r.status == "ok" and r.program_ok and all(c.status == "ok" for c in r.calls) for r in results)
    return dt, good


def bench_baseline(runs: int, workers: int) -> tuple[float, int]:
    """(seconds, runs that exited 0) of a fresh ``python3 -I`` per run."""
    def one(_):
        p = subprocess.run([sys.executable, "-I", "-c", PROGRAM], capture_output=True, timeout=60)
        return p.returncode == 0

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(one, range(runs)))
    return time.perf_counter() - t, ok


_BARE_FORK = """
import os, sys, time
code = compile(sys.argv[1], "p", "exec")
n, t = 0, time.perf_counter()
while time.perf_counter() - t < float(sys.argv[2]):
    pid = os.fork()
    if pid == 0:
        exec(code, {})
        os._exit(0)
    os.waitpid(pid, 0)
    n += 1
print(n / (time.perf_counter() - t))
"""


def bench_bare_fork(workers: int, seconds: float = 2.0) -> float:
    """Reference, not a sandbox: fork + exec + exit from a bare `python -I -S`, no isolation,
    no result channel. Shows what this machine allows right now (it is shared)."""
    procs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", _BARE_FORK, PROGRAM, str(seconds)],
                              stdout=subprocess.PIPE, text=True) for _ in range(workers)]
    return sum(float(p.communicate()[0]) for p in procs)


class Side:
    """One measured side: runs, seconds and successes summed over the rounds."""

    def __init__(self, label: str) -> None:
        self.label, self.runs, self.seconds, self.ok = label, 0, 0.0, 0

    def add(self, runs: int, seconds: float, ok: int) -> None:
        self.runs, self.seconds, self.ok = self.runs + runs, self.seconds + seconds, self.ok + ok

    @property
    def rate(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0

    @property
    def failed(self) -> int:
        return self.runs - self.ok

    def line(self) -> str:
        return f"{self.label:<33}{self.rate:8.1f} runs/s  ({self.ok}/{self.runs} ok)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000, help="executor runs (10 asserts each), over all rounds")
    ap.add_argument("--baseline-runs", type=int, default=200, help="python3 -I runs, over all rounds")
    ap.add_argument("--rounds", type=int, default=4, help="rounds; each times both sides, in turn")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    workers = args.workers or os.cpu_count() or 1
    rounds = max(1, args.rounds)
    asserts, calls = Side("executor (program + 10 asserts):"), Side("executor (program + 10 calls):")
    base = Side("baseline python3 -I per run:")
    with Executor(workers=workers) as ex:
        lost = ex.lost_protections
        bench_executor(ex, 200, False)  # warm-up
        # Both sides in every round, in turn (which goes first alternates), so that a change
        # of the shared machine's load meanwhile weighs on both alike.
        for i in range(rounds):
            n_ex, n_base = args.runs // rounds, max(1, args.baseline_runs // rounds)
            steps = [lambda: asserts.add(n_ex, *bench_executor(ex, n_ex, False)),
                     lambda: calls.add(n_ex // 2, *bench_executor(ex, n_ex // 2, True)),
                     lambda: base.add(n_base, *bench_baseline(n_base, workers))]
            for step in (steps if i % 2 == 0 else steps[::-1]):
                step()
    bare_rate = bench_bare_fork(workers)
    print(f"workers: {workers}  cores: {os.cpu_count()}  rounds: {rounds}  lost protections: {sorted(lost) or 'none'}")
    for side in (asserts, calls, base):
        print(side.line())
    print(f"reference: bare fork+exec+exit:  {bare_rate:8.1f} runs/s  (no isolation; the machine's ceiling now)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    failed = {s.label.rstrip(':'): s.failed for s in (asserts, calls, base) if s.failed}
    if failed:  # a rate of failing runs measures something else: no verdict from it
        print("ratio: none; targets: NO VERDICT: runs failed: "
              + ", ".join(f"{label} {n}" for label, n in failed.items()))
        return 1
    ratio = asserts.rate / base.rate
    print(f"ratio: {ratio:.1f}x   targets: >= 800 runs/s, >= 8x -> "
          f"{'MET' if asserts.rate >= 800 and ratio >= 8 else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
