"""Throughput of the sandboxed executor vs a process-per-run baseline, side by side.

Each run is a short program: a function plus ~10 asserts (the judge's normal shape).
The executor runs them on its warm fork-server workers; the baseline starts a fresh
``python3 -I`` per run with ``subprocess`` (as many in parallel as there are workers).
Targets on the 2-core development machine: >= 800 runs/s and >= 8x the baseline.

    python benchmarks/sandbox_throughput.py [--runs N] [--baseline-runs N] [--workers W]
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


def bench_executor(ex: Executor, runs: int, calls_mode: bool) -> tuple[float, int]:
    if calls_mode:
        body, _, _ = PROGRAM.partition("\nassert ")
        calls = [f'is_palindrome("{w}")' for w in ("racecar", "hello", "", "a", "ab", "12321",
                                                    "12345", "noon", "abcba", "xyz")]
        jobs = [Job(program=body, calls=calls) for _ in range(runs)]
    else:
        jobs = [Job(program=PROGRAM) for _ in range(runs)]
    t = time.perf_counter()
    results = ex.run_many(jobs)
    dt = time.perf_counter() - t
    good = sum(r.status == "ok" and r.program_ok and all(c.status == "ok" for c in r.calls) for r in results)
    return runs / dt, good


def bench_baseline(runs: int, workers: int) -> tuple[float, int]:
    def one(_):
        p = subprocess.run([sys.executable, "-I", "-c", PROGRAM], capture_output=True, timeout=60)
        return p.returncode == 0

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(one, range(runs)))
    return runs / (time.perf_counter() - t), ok


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--baseline-runs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    workers = args.workers or os.cpu_count() or 1
    with Executor(workers=workers) as ex:
        lost = ex.lost_protections
        bench_executor(ex, 200, False)  # warm-up
        ex_rate, ex_ok = bench_executor(ex, args.runs, False)
        calls_rate, calls_ok = bench_executor(ex, args.runs // 2, True)
    base_rate, base_ok = bench_baseline(args.baseline_runs, workers)
    bare_rate = bench_bare_fork(workers)
    print(f"workers: {workers}  cores: {os.cpu_count()}  lost protections: {sorted(lost) or 'none'}")
    print(f"executor (program + 10 asserts): {ex_rate:8.1f} runs/s  ({ex_ok}/{args.runs} ok)")
    print(f"executor (program + 10 calls):   {calls_rate:8.1f} runs/s  ({calls_ok}/{args.runs // 2} ok)")
    print(f"baseline python3 -I per run:     {base_rate:8.1f} runs/s  ({base_ok}/{args.baseline_runs} ok)")
    print(f"reference: bare fork+exec+exit:  {bare_rate:8.1f} runs/s  (no isolation; the machine's ceiling now)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ratio = ex_rate / base_rate
    print(f"ratio: {ratio:.1f}x   targets: >= 800 runs/s, >= 8x -> "
          f"{'MET' if ex_rate >= 800 and ratio >= 8 else 'NOT MET'}")


if __name__ == "__main__":
    main()
