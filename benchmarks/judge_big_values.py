"""Seconds the judge takes on one problem whose reference returns a big value.

A reference that returns a large set, list, dict or string (5-7 MB encoded, below the
16 MiB a value may cross whole) makes the trusted parent do the work that is costly:
checking, decoding, comparing and writing out the values that come back. Each problem
here has a right and a wrong candidate and two suites per candidate; each suite tests the
big call once, with a wrong literal expectation in the first suite (its reason shows the
reference's value) and a right expected expression in the second, plus two small calls.
In the judge's default mode (one program per candidate) every candidate's run evaluates
the reference's calls again, so the parent receives the same big value once per
candidate and suite.

Per kind it prints the median of `--repeats` timed judgements (after one untimed one of
a small instance), the parent's CPU seconds in them (its threads), the sandbox's (its
workers, which read and check the values a run sends, and their runs, which compute and
encode them; Linux), the longest reason and failure text, and a digest of the
verdicts (validity, rewards, counts, every test's kind, used, passed and corrected text):
two versions of the judge that agree on the digests agree on every verdict. `--profile`
prints where the parent's time goes in one judgement (cProfile, the judging thread).
`--reference PATH` also times the Code-A1 reference's reward code (`reward.py`, run as
`benchmarks/reference_diff.py` runs it) on the same problems.

    python benchmarks/judge_big_values.py [--kinds set,list,dict,str] [--repeats 5] [--legacy]
    PYTHONPATH=/tmp/old-checkout python benchmarks/judge_big_values.py   # the same on other code
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import statistics
import subprocess
import time
from pathlib import Path

import codea1
from codea1.data import Problem
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.sandbox import Executor, Limits

LIMITS = Limits(timeout_s=60.0, call_timeout_s=30.0)

# kind: (function name, reference body, wrong candidate's body, argument of the big call,
#        a right EXPECTED expression of the big call, the small call's right value)
KINDS = {
    "set": ("pairs", "return {(i, 2 * i, 'x') for i in range(n)}", "return {(i, 2 * i, 'y') for i in range(n)}",
            100_000, "set((i, 2 * i, 'x') for i in range(100000))", "{(0, 0, 'x'), (1, 2, 'x')}"),
    "list": ("seq", "return [i * 7 for i in range(n)]", "return [i * 7 for i in range(n - 1)] + [0]",
             400_000, "list(range(0, 2800000, 7))", "[0, 7]"),
    "dict": ("names", "return {i: str(i) for i in range(n)}", "return {i: str(i + 1) for i in range(n)}",
             150_000, "dict((i, str(i)) for i in range(150000))", "{0: '0', 1: '1'}"),
    "str": ("text", "return 'ab' * n", "return 'ab' * (n - 1) + 'ba'",
            3_000_000, "'ab' * 3000000", "'abab'"),
}


def problem_of(kind: str, scale: float = 1.0) -> tuple[Problem, list[str], list[list[str]]]:
    """The problem of `kind`, its right and wrong candidates and their suites (`scale`
    shrinks the big call, for the untimed first judgement)."""
    name, body, wrong, n, right_expected, small = KINDS[kind]
    big = max(2, int(n * scale))
    reference = f"def {name}(n):\n    {body}\n"
    problem = Problem(id=f"big/{kind}", question="", entry_point=name, reference=reference)
    expected = right_expected.replace(str(n), str(big)).replace(str(n * 7), str(big * 7))
    first = (f"```python\nassert {name}({big}) == {'set()' if kind == 'set' else 'None'}\n"
             f"assert {name}(2) == {small}\nassert {name}(1) == None\n```")
    second = f"```python\nassert {name}({big}) == {expected}\nassert {name}(2) == {small}\n```"
    codes = [f"```python\n{reference}```", f"```python\ndef {name}(n):\n    {wrong}\n```"]
    return problem, codes, [[first, second] for _ in codes]


def verdict_digest(judgement) -> str:
    """sha256 of everything a verdict is made of (not the human-readable reasons)."""
    rows = [judgement.code_valid, judgement.code_rewards, judgement.test_rewards, judgement.mistakes_passed]
    for row in judgement.suites:
        for s in row:
            rows.append([s.valid, s.invalid, sorted(s.invalid_kinds.items()), s.valid_ratio, s.gen_pass_rate,
                         s.gen_fail_rate, s.mb_pass_rate, s.pass_score, s.attack, s.reward])
            rows.append([[t.normalized, t.call, t.valid, t.used, t.kind, t.passed] for t in s.tests])
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def texts(judgement) -> tuple[int, int]:
    """The longest reason and the longest failure of the judgement's tests."""
    tests = [t for row in judgement.suites for s in row for t in s.tests]
    return max(len(t.reason or "") for t in tests), max(len(t.failure or "") for t in tests)


def sandbox_cpu(executor: Executor) -> float:
    """CPU seconds the executor's worker processes and the runs they reaped have used so far
    (read from /proc: 0.0 where there is none)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, times = {}, {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # (gone meanwhile)
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry))
            times[int(entry)] = sum(int(x) for x in fields[11:15]) / tick  # (its own, and its reaped children's)
    total, todo = 0.0, [w.proc.pid for w in executor._all]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += parents.get(pid, [])
    return total


def time_kind(judge: Judge, kind: str, repeats: int, profile: bool) -> dict:
    problem, codes, suites = problem_of(kind, scale=0.01)
    judge.judge_step([ProblemRollout(problem, codes, suites)])  # (workers' imports, caches)
    problem, codes, suites = problem_of(kind)
    rollout = ProblemRollout(problem, codes, suites)
    walls, cpus, sandbox, digests = [], [], [], set()
    for _ in range(repeats):
        wall, cpu, runs = time.perf_counter(), time.process_time(), sandbox_cpu(judge.executor)
        (judgement,) = judge.judge_step([rollout])
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        sandbox.append(sandbox_cpu(judge.executor) - runs)
        digests.add(verdict_digest(judgement))
    if len(digests) != 1:
        raise SystemExit(f"{kind}: the verdicts differ between repeats: {sorted(digests)}")
    if profile:
        profiler = cProfile.Profile()
        profiler.runcall(judge.judge_step, [rollout])
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
        print(f"--- profile, {kind} (judging thread, by own time) ---")
        print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()))
    reason, failure = texts(judgement)
    return {"kind": kind, "wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "sandbox_cpu_s": statistics.median(sandbox), "walls": walls, "reason_chars": reason,
            "failure_chars": failure, "digest": digests.pop(),
            "valid": judgement.code_valid, "code_rewards": judgement.code_rewards}


def time_reference(path: Path, kind: str, repeats: int) -> float:
    """Median seconds of the Code-A1 reference's reward code on the same problem."""
    import reference_diff as rd  # (after codea1 is imported: it puts its own checkout first on sys.path)

    ref, book = rd.load_reference(path, None)
    problem, codes, suites = problem_of(kind)
    case = rd.Case(kind, "bench", problem.reference, problem.entry_point, [rd.Step(codes, suites)])
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        rd.run_reference(ref, book, case)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def checkout() -> str:
    """Where the judged code comes from: its folder and commit (+ "dirty" with changes)."""
    root = Path(codea1.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "codea1"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(root)
    return f"{root} at {head}{' + changes' if dirty else ''}"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--legacy", action="store_true", help="judge.isolate_calls=true (a reference run, then candidates)")
    ap.add_argument("--profile", action="store_true", help="cProfile one more judgement of each kind")
    ap.add_argument("--reference", type=Path, help="the Code-A1 reference's reward.py, timed on the same problems")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or args.repeats < 1:
        ap.error(f"--kinds: unknown {unknown} (known: {', '.join(KINDS)})" if unknown else "--repeats must be >= 1")
    print(f"code: {checkout()}")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    mode = "isolate_calls (a reference run, then candidates)" if args.legacy else "one program per candidate (default)"
    print(f"mode: {mode}; 2 candidates (right, wrong) x 2 suites; median of {args.repeats}")
    rows = []
    with Executor(workers=2, limits=LIMITS) as executor:
        judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=args.legacy))
        for kind in kinds:
            row = time_kind(judge, kind, args.repeats, args.profile)
            if args.reference:
                row["reference_s"] = time_reference(args.reference, kind, args.repeats)
            rows.append(row)
            ref = f"  reference's reward code {row['reference_s']:.2f} s" if args.reference else ""
            print(f"{kind:5} judge {row['wall_s']:6.2f} s (parent CPU {row['cpu_s']:6.2f} s, sandbox CPU "
                  f"{row['sandbox_cpu_s']:6.2f} s; runs "
                  f"{', '.join(f'{w:.2f}' for w in row['walls'])}){ref}  longest reason {row['reason_chars']:,} "
                  f"chars, failure {row['failure_chars']:,}  verdicts {row['digest']}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        args.json.write_text(json.dumps({"code": checkout(), "cpu": cpu_name(), "mode": mode, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
