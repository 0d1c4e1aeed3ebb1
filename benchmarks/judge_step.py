"""Seconds per judge step of paper shape, fork-server sandbox vs. a fresh process per run.

A step: 32 MBPP+ problems x 8 candidates x 8 suites x 8 asserts, plus 8 Mistake Book
tests a problem (288 sandbox runs: 32 reference runs, 256 candidate runs). Candidates
are reference solutions (verbatim, fenced, reformatted) and deliberately broken variants
(AST mutants from `codea1.eval.mutation`, code that raises at import, a syntax error).
Suites are drawn from MBPP+'s own inputs, with wrong expectations, duplicates,
assignments and non-test lines mixed in. Two kinds of tests are measured side by side:

- light: inputs on which the reference takes at most 1 ms a call (timed in the sandbox
  first), the size of the asserts a test model writes from the question's example;
- all: every MBPP+ input, including EvalPlus's stress inputs (`sequence(1000000)`), where
  the step is bound by the test computation itself, which no executor can shorten.

The same `Judge` code runs twice in one process: once on `codea1.sandbox.Executor`, once
on `ProcessPerRun`, an executor that starts `python3 -s` for every run (no isolation at
all, so the comparison flatters the baseline). Both use as many parallel workers as
there are CPU cores, and they alternate, one timed step each per round, so that both meet
the same load on a shared machine. Candidates that hang are swapped for a raising variant before
timing: a hanging call costs its time-out in any design and would only measure that.
Before each timed step of the fork-server judge, an untimed step of 64 other problems
stands for a training run's previous step, so that the workers' compile cache does not
hold this step's calls (a training step's tests are new to it).

Usage: python benchmarks/judge_step.py [--data ../shared/data/mbppplus.parquet] [--steps 5]
       [--tests light|all|both] [--light-ms 1.0] [--no-baseline] [--skip MBPP/84,...]
       python benchmarks/judge_step.py --stdin [--steps 3]: the stdin problems' step (stdin_step.py)
Targets (2 cores): <= 3 s a step, >= 4x faster than a process per run.
"""

from __future__ import annotations

import argparse
import ast
import heapq
import importlib.util
import itertools
import json
import os
import py_compile
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import NamedTuple

from codea1.data import Problem, load_problems
from codea1.eval.mutation import generate_mutants
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.judge.judge import _REFERENCE_PRIORITY
from codea1.sandbox import CallResult, Executor, Job, Limits, RunResult
from codea1.sandbox._worker import RUN_MALLOC_TUNABLES, _CodeCache
from codea1.sandbox import values as sandbox_values

N_PROBLEMS, N_CODES, N_SUITES, N_ASSERTS, N_MISTAKES = 32, 8, 8, 8, 8
#: Problems of the untimed step judged before each timed one (see `measure`).
FLUSH_PROBLEMS = 64
DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbppplus.parquet"

# The driver of one process-per-run: exec the program, evaluate each call with a
# per-call alarm, encode values to JSON with the sandbox's own encoder (a copy of its
# module, imported from its cached bytecode: compiling it afresh would cost each process
# 2.8 ms), print JSON at the end.
_DRIVER = r"""
import io, json, signal, sys
sys.path.insert(0, VALUES_DIR)
from _run_values import encode_json
job = json.loads(sys.stdin.read())
real_stdout = sys.stdout
sys.stdout = io.StringIO()
class CallTimeout(BaseException):
    pass
def on_alarm(signum, frame):
    raise CallTimeout()
signal.signal(signal.SIGALRM, on_alarm)
g = {"__name__": "__main__"}
out = {"program_ok": False, "program_error": None, "calls": []}
try:
    exec(compile(job["program"], "<program>", "exec"), g)
    out["program_ok"] = True
except BaseException as e:
    out["program_error"] = f"{type(e).__name__}: {e}"
for call in job["calls"]:
    if not out["program_ok"]:
        out["calls"].append({"status": "not-run"})
        continue
    signal.setitimer(signal.ITIMER_REAL, job["call_timeout_s"])
    try:
        value = eval(call, g)
        signal.setitimer(signal.ITIMER_REAL, 0)
        out["calls"].append('{"status":"ok","value":' + encode_json(value) + "}")
    except CallTimeout:
        out["calls"].append({"status": "timeout"})
    except BaseException as e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        out["calls"].append({"status": "error", "error": f"{type(e).__name__}: {e}"})
calls = ",".join(c if type(c) is str else json.dumps(c) for c in out.pop("calls"))
real_stdout.write(json.dumps(out)[:-1] + ',"calls":[' + calls + "]}")
"""


# As in the executor's runs: one hash seed for all processes, so that reference and
# candidate iterate equal sets of strings in the same order (`-I` would ignore it), and the
# runs' malloc (large allocations on huge pages, freed memory kept for the next call): the
# comparison is about the process model, not malloc.
_BASELINE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
                 "GLIBC_TUNABLES": RUN_MALLOC_TUNABLES}


class ProcessPerRun:
    """The baseline: a fresh `python3 -s` process for every run, `workers` at a time.

    It schedules like the executor (one priority queue, highest first), so the two differ
    only in how a run is executed.
    """

    def __init__(self, workers: int, limits: Limits) -> None:
        self.limits = limits
        self.queue: list = []
        self.seq = itertools.count()
        self.cv = threading.Condition()
        self.values_dir = tempfile.TemporaryDirectory(prefix="codea1-baseline-")
        module = os.path.join(self.values_dir.name, "_run_values.py")
        shutil.copyfile(sandbox_values.__file__, module)
        py_compile.compile(module, cfile=importlib.util.cache_from_source(module), doraise=True)
        self.driver = f"VALUES_DIR = {self.values_dir.name!r}\n" + _DRIVER
        for _ in range(workers):
            threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, job: Job, priority: float = 0.0) -> Future:
        future: Future = Future()
        with self.cv:
            heapq.heappush(self.queue, (-priority, next(self.seq), job, future))
            self.cv.notify()
        return future

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.queue:
                    self.cv.wait()
                _, _, job, future = heapq.heappop(self.queue)
            if future.set_running_or_notify_cancel():
                future.set_result(self.run(job))

    def run(self, job: Job) -> RunResult:
        limits = job.limits or self.limits
        payload = json.dumps({"program": job.program, "calls": list(job.calls), "call_timeout_s": limits.call_timeout_s})
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-s", "-c", self.driver], input=payload, capture_output=True, text=True,
                timeout=limits.timeout_s, env=_BASELINE_ENV, cwd="/",
            )
        except subprocess.TimeoutExpired:
            return RunResult(status="timeout", calls=[CallResult("not-run") for _ in job.calls])
        wall = time.perf_counter() - start
        try:
            out = json.loads(done.stdout)
        except json.JSONDecodeError:
            return RunResult(status="error", program_error=done.stderr[-200:], calls=[CallResult("not-run") for _ in job.calls])
        calls = [CallResult(c["status"], c.get("value"), c.get("error")) for c in out["calls"]]
        return RunResult(status="ok", program_ok=out["program_ok"], program_error=out["program_error"], calls=calls,
                         wall_s=wall)


class RunRecord(NamedTuple):
    reference: bool  # a reference run (else a candidate run)
    wall_s: float
    cpu_s: float
    calls: int
    done_at: float  # time.perf_counter() when it came back


class TimedExecutor:
    """Records every run of a step (`RunRecord`)."""

    def __init__(self, inner) -> None:
        self.inner, self.runs = inner, []

    def submit(self, job: Job, priority: float = 0.0) -> Future:
        future = self.inner.submit(job, priority=priority)
        reference = priority >= _REFERENCE_PRIORITY

        def record(f: Future) -> None:
            r = f.result()
            self.runs.append(RunRecord(reference, r.wall_s, r.cpu_s, len(job.calls), time.perf_counter()))

        future.add_done_callback(record)
        return future


def _inputs_and_results(problem: Problem) -> tuple[list, list] | None:
    """MBPP+'s `inputs` / `results` literals from the golden check program."""
    try:
        tree = ast.parse(problem.test_program or "")
    except SyntaxError:
        return None
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("inputs", "results") and name not in found:
                try:
                    found[name] = ast.literal_eval(node.value)
                except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                    return None
    if "inputs" not in found or "results" not in found:
        return None
    return found["inputs"], found["results"]  # type: ignore[return-value]


def _call(entry: str, args: list) -> str:
    return f"{entry}({', '.join(repr(a) for a in args)})"


def test_pools(problems: list[Problem], executor: Executor, light_ms: float) -> dict[str, dict[str, list]]:
    """Per problem, the MBPP+ inputs a test can use: `all` (literals under 300 characters)
    and `light` (those the reference computes in at most `light_ms`, timed in the sandbox).

    MBPP+'s `plus` inputs are stress tests (`sequence(1000000)` runs about 0.3 s); a test
    model writes asserts of the size of the question's example, which are the light ones.
    """
    pools: dict[str, dict[str, list]] = {}
    jobs, owners = [], []
    for p in problems:
        data = _inputs_and_results(p)
        if data is None or "numpy" in p.reference:
            continue
        inputs, results = data
        pool = [(i, r) for i, r in zip(inputs, results) if isinstance(i, list) and len(repr(i)) < 300 and len(repr(r)) < 300]
        if len(pool) < 12:
            continue
        # best of three, so that the pool does not change with the machine's load
        timer = ("(lambda pc: min((lambda t0: ({call}, pc() - t0)[1])(pc()) for _ in range(3)))"
                 "(__import__('time').perf_counter)")
        calls = [timer.format(call=_call(p.entry_point, args)) for args, _ in pool]
        jobs.append(Job(program=p.reference, calls=calls, limits=Limits(timeout_s=120.0, call_timeout_s=10.0)))
        owners.append((p, pool))
    for (p, pool), run in zip(owners, executor.run_many(jobs)):
        light = [item for item, call in zip(pool, run.calls)
                 if call.status == "ok" and call.value[0] == "float" and float.fromhex(call.value[1]) <= light_ms / 1000]
        pools[p.id] = {"all": pool, "light": light}
    return pools


def build_rollouts(problems: list[Problem], pools: dict[str, dict[str, list]], which: str,
                   rng: random.Random, n_problems: int = N_PROBLEMS) -> list[ProblemRollout]:
    rollouts = []
    for p in problems:
        if p.id not in pools:
            continue
        pool = pools[p.id][which]
        if len(pool) < 12:
            continue
        mutants = [m.source for m in generate_mutants(p.reference, ("binary", "comparison", "number", "boolean"))]
        if len(mutants) < 3:
            continue
        broken = [
            f"```python\n{p.reference}\n```",
            p.reference,
            ast.unparse(ast.parse(p.reference)),
            *rng.sample(mutants, 3),
            "import os\nraise RuntimeError('setup failed')\n" + p.reference,
            p.reference.rstrip()[: max(10, len(p.reference) // 2)] + "\n    return (",
        ]
        suites = []
        for _ in range(N_CODES):
            row = []
            for _ in range(N_SUITES):
                lines = []
                for k, (args, result) in enumerate(rng.sample(pool, N_ASSERTS)):
                    expected = result if rng.random() > 0.15 else rng.choice(pool)[1]  # some wrong expectations
                    if k == 2 and rng.random() < 0.5:
                        lines.append(f"x = {args[0]!r}")
                        lines.append(f"assert {_call(p.entry_point, ['X'] + args[1:])} == {expected!r}".replace("'X'", "x"))
                    elif k == 5 and rng.random() < 0.3:
                        lines.append(lines[-1] if lines else f"print({_call(p.entry_point, args)})")  # duplicate
                    elif k == 7 and rng.random() < 0.3:
                        lines.append(f"print({_call(p.entry_point, args)})")  # not a test
                    else:
                        lines.append(f"assert {_call(p.entry_point, args)} == {expected!r}")
                row.append("Here are the tests:\n```python\n" + "\n".join(lines) + "\n```\n")
            suites.append(row)
        mistakes = [f"assert {_call(p.entry_point, a)} == {r!r}" for a, r in rng.sample(pool, N_MISTAKES)]
        rollouts.append(ProblemRollout(p, broken, suites, mistakes))
        if len(rollouts) == n_problems:
            break
    return rollouts


def other_rollouts(problems: list[Problem], pools: dict[str, dict[str, list]], which: str,
                   rollouts: list[ProblemRollout], seed: int) -> list[ProblemRollout]:
    """`FLUSH_PROBLEMS` problems not among `rollouts`, for the untimed step judged before
    each timed one (see `measure`)."""
    used = {r.problem.id for r in rollouts}
    return build_rollouts([p for p in problems if p.id not in used], pools, which,
                          random.Random(seed + 1), n_problems=FLUSH_PROBLEMS)


def prepare_flush(judge: Judge, others: list[ProblemRollout]) -> None:
    """Swap the hanging candidates of the untimed step; say how much it sends the workers,
    and warn when that may leave the timed step's calls in their compile cache."""
    _swap_timeouts(judge, others)
    flush, capacity = sent_chars(others), _CodeCache().max_chars
    print(f"before each timed step: an untimed step of {len(others)} other problems ({flush:,} characters of "
          f"programs and tests; a worker's compile cache holds {capacity:,})")
    if flush < 2 * capacity:
        print("WARNING: the untimed step may leave this step's calls compiled in the workers: "
              "the timed steps would be faster than a training step")


def sent_chars(rollouts: list[ProblemRollout]) -> int:
    """Characters of distinct programs and test lines a step sends to the workers (an upper
    bound on what it adds to a worker's compile cache; calls are shorter than their lines)."""
    texts = {r.problem.program(c) for r in rollouts for c in r.codes}
    texts |= {line for r in rollouts for row in r.tests for suite in row for line in suite.splitlines()}
    texts |= {m for r in rollouts for m in r.mistakes}
    return sum(len(t) for t in texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--steps", type=int, default=5, help="rounds of one timed step each way (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baseline", action="store_true", help="skip the process-per-run comparison")
    parser.add_argument("--skip", default="", help="comma-separated problem ids to leave out (e.g. a compute-heavy one)")
    parser.add_argument("--tests", choices=("light", "all", "both"), default="both",
                        help="test inputs: light (what a test model writes), all MBPP+ inputs, or both side by side")
    parser.add_argument("--light-ms", type=float, default=1.0,
                        help="a light test's call takes the reference at most this long (default 1 ms)")
    parser.add_argument("--stdin", action="store_true",
                        help="the step on the bundled standard-input problems instead (benchmarks/stdin_step.py)")
    args = parser.parse_args()
    if args.stdin:
        from stdin_step import main as stdin_main  # (this directory is on sys.path when run as a script)

        stdin_main(args.steps, args.seed)
        return
    if not args.data.is_file():
        sys.exit(f"{args.data}: MBPP+ parquet not found (pass --data)")

    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    problems = [p for p in load_problems(args.data) if p.id not in skip]
    workers = os.cpu_count() or 1
    limits = Limits()
    start = time.perf_counter()
    rows = []
    with Executor(workers=workers, limits=limits) as executor:
        print(f"executor start-up: {time.perf_counter() - start:.2f} s (once per training run); {workers} workers")
        pools = test_pools(problems, executor, args.light_ms)
        baseline = None if args.no_baseline else ProcessPerRun(workers, limits)
        for which in (["light", "all"] if args.tests == "both" else [args.tests]):
            rollouts = build_rollouts(problems, pools, which, random.Random(args.seed))
            others = other_rollouts(problems, pools, which, rollouts, args.seed)
            rows.append((which, measure(rollouts, others, executor, baseline, limits, args.steps)))
    print()
    print("| tests | fork-server judge | process per run | speed-up (best steps; median of rounds) |")
    print("|---|---|---|---|")
    for which, (fork, base, median) in rows:
        print(f"| {TEST_KINDS[which]} | {fork:.2f} s/step | "
              + (f"{base:.2f} s/step | {base / fork:.1f}x; {median:.1f}x |" if base else "- | - |"))
    print("targets: <= 3 s a step, >= 4x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


TEST_KINDS = {"light": "light (reference <= --light-ms a call)", "all": "all MBPP+ inputs (stress included)"}


def measure(rollouts, others, executor, baseline, limits, steps) -> tuple[float, float | None, float | None]:
    """Best-of-`steps` seconds per step with the fork-server executor and with `baseline`.

    The two alternate, one step each per round, so that both meet the same load on a
    shared machine (its speed drifts by 10-30% within minutes); the median of the rounds'
    ratios is printed beside the ratio of the best steps. Before each timed step the
    fork-server judges `others` (other problems, untimed), as a training run judged its
    previous step: the workers keep compiled calls (`_CodeCache`), and a step repeated as
    is would find every call of the last one compiled, which a training step, with tests
    never seen before, does not (measured: 10% faster steps).
    """
    n_tests = sum(s.count("\nassert ") for r in rollouts for row in r.tests for s in row)
    print(f"\n== {len(rollouts)} problems x {N_CODES} candidates x {N_SUITES} suites x {N_ASSERTS} asserts "
          f"+ {N_MISTAKES} Mistake Book tests a problem")
    timed = TimedExecutor(executor)
    judge = Judge(timed, JudgeConfig(limits=limits))
    swapped = _swap_timeouts(judge, rollouts)
    print(f"candidates swapped for hanging: {swapped}")
    prepare_flush(judge, others)
    base_judge = None if baseline is None else Judge(baseline, JudgeConfig(limits=limits))
    fork_times, fork_cpu, fork_runs, base_times, base_cpu = [], [], [], [], []
    results = base_results = None
    for _ in range(steps):
        judge.judge_step(others)
        timed.runs.clear()
        c0 = time.process_time()
        t0 = time.perf_counter()
        results = judge.judge_step(rollouts)
        fork_times.append(time.perf_counter() - t0)
        fork_cpu.append(time.process_time() - c0)
        fork_runs.append(list(timed.runs))
        if base_judge is not None:
            c0, k0 = time.process_time(), _children_cpu()
            t0 = time.perf_counter()
            base_results = base_judge.judge_step(rollouts)
            base_times.append(time.perf_counter() - t0)
            base_cpu.append((time.process_time() - c0, _children_cpu() - k0))
    summary(results, n_tests)
    fork = min(fork_times)
    best = fork_times.index(fork)
    runs = fork_runs[best]
    for name, reference in (("reference", True), ("candidate", False)):
        mine = [r for r in runs if r.reference is reference]
        walls = sorted((r.wall_s for r in mine), reverse=True)
        print(f"{name} runs: {len(mine)}, {sum(r.calls for r in mine)} calls, summed wall {sum(walls):.2f} s "
              f"(slowest {', '.join(f'{w:.2f}' for w in walls[:4])} s), summed CPU {sum(r.cpu_s for r in mine):.2f} s")
    workers = executor.n_workers
    busy = sum(r.wall_s for r in runs) / (workers * fork)
    print(f"fork-server judge : {fork:.2f} s/step (best of {steps}; all: {', '.join(f'{t:.2f}' for t in fork_times)}; "
          f"workers busy {100 * busy:.0f}% of the step)")
    print(f"  CPU a step: judge process {fork_cpu[best]:.2f} s, "
          f"inside the sandboxed runs {sum(r.cpu_s for r in runs):.2f} s (as the sandbox reports it)")
    if base_judge is None:
        return fork, None, None
    differ = [a.problem_id for a, b in zip(results, base_results)
              if a.code_rewards != b.code_rewards or a.test_rewards != b.test_rewards]
    base = min(base_times)
    print(f"process per run   : {base:.2f} s/step (best of {steps}; all: {', '.join(f'{t:.2f}' for t in base_times)})")
    parent_b, children_b = base_cpu[base_times.index(base)]
    print(f"  CPU a step: judge process {parent_b:.2f} s, python3 -s processes {children_b:.2f} s")
    ratios = sorted(b / f for f, b in zip(fork_times, base_times))
    print(f"speed-up          : {base / fork:.1f}x (best steps); each round: "
          f"{', '.join(f'{r:.1f}x' for r in ratios)}, median {statistics.median(ratios):.1f}x")
    print(f"identical rewards from both executors: {not differ} {differ if differ else ''}")
    return fork, base, statistics.median(ratios)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _swap_timeouts(judge: Judge, rollouts: list[ProblemRollout]) -> int:
    """Judge once (warm-up, untimed); swap each candidate with a timed-out call for a raising one."""
    swapped = 0
    for rollout, result in zip(rollouts, judge.judge_step(rollouts)):
        codes = list(rollout.codes)
        for i, row in enumerate(result.suites):
            hung = any(t.failure == "timed out" for s in row for t in s.tests)
            if hung or "timeout" in (result.code_errors[i] or ""):
                codes[i] = "raise ValueError('replaced: hangs')\n"
                swapped += 1
        rollout.codes = codes
    return swapped


def summary(results, n_tests: int) -> None:
    valid = sum(v for r in results for v in r.code_valid)
    kinds: dict[str, int] = {}
    for r in results:
        for suite in (suite for row in r.suites for suite in row):
            for k, v in suite.invalid_kinds.items():
                kinds[k] = kinds.get(k, 0) + v
    mean_code = sum(sum(r.code_rewards) for r in results) / sum(len(r.code_rewards) for r in results)
    print(f"judged: {valid} valid candidates of {sum(len(r.code_valid) for r in results)}, {n_tests} asserts, "
          f"invalid tests {kinds}, mean code reward {mean_code:.3f}")


if __name__ == "__main__":
    main()
