"""Golden-test scores of candidate codes: the `golden` baseline's reward and validation.

The sandbox job is the one `codea1 eval code` runs (`codea1.judge.golden.golden_job`):
the candidate followed by the problem's golden test program, then a check that the
entry point exists, then each golden assert. A candidate is *correct* when all of it
holds; its *pass rate* (the golden baseline's reward) is the share of golden asserts
it passes, or 1/0 for a problem that only has a test program. A candidate that fails
the test program, or defines no entry point, scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from codea1.data import Problem
from codea1.judge.golden import golden_job, verdict_of
from codea1.judge.stdin import golden_stdin
from codea1.sandbox import to_source


@dataclass(frozen=True)
class GoldenResult:
    pass_rate: float
    correct: bool
    status: str  # codea1.judge.golden.Verdict.status: pass | fail | no-function | error | timeout | infra


def has_golden(problem: Problem) -> bool:
    return bool(problem.tests) or bool(problem.test_program)


def golden_items(problems: Sequence[Problem], codes: Sequence[Sequence[str]]) -> list[tuple[Problem, str]]:
    """The (problem, program) pairs of golden mode's training reward: each extracted code
    after the problem's own imports (`Problem.program`), the one rule of validation and
    `codea1 eval code` too (the reference's golden baseline runs a candidate after the
    reference's imports)."""
    return [(p, p.program(c)) for p, group in zip(problems, codes) for c in group]


def golden_results(executor, items: Sequence[tuple[Problem, str]], limits=None) -> list[GoldenResult]:
    """Score each (problem, extracted code) pair; all jobs run in parallel. Stdin problems'
    (`Problem.kind`) go to `codea1.judge.stdin.golden_stdin`: the same figures, from the
    outputs compared in this process."""
    if any(p.kind == "stdin" for p, _ in items):
        return _by_kind(executor, items, limits)
    runs = executor.run_many([golden_job(p, code, limits) for p, code in items]) if items else []
    out = []
    for (problem, _code), run in zip(items, runs):
        verdict = verdict_of(run)
        defined = (run.program_ok and bool(run.calls) and run.calls[0].status == "ok"
                   and to_source(run.calls[0].value) == "True")
        if not has_golden(problem) or not defined:
            rate = 0.0
        elif problem.tests:
            rate = sum(1 for c in run.calls[1:] if c.status == "ok") / len(problem.tests)
        else:
            rate = 1.0  # the test program ran clean (program_ok) and the function exists
        out.append(GoldenResult(rate, verdict.passed and has_golden(problem), verdict.status))
    return out


def _by_kind(executor, items: Sequence[tuple[Problem, str]], limits) -> list[GoldenResult]:
    stdin = [k for k, (p, _) in enumerate(items) if p.kind == "stdin"]
    rest = [k for k in range(len(items)) if k not in set(stdin)]
    out: list[GoldenResult | None] = [None] * len(items)
    for k, r in zip(rest, golden_results(executor, [items[k] for k in rest], limits)):
        out[k] = r
    checked = golden_stdin(executor, [items[k] for k in stdin if has_golden(items[k][0])], limits)
    verdicts = iter(checked)
    for k in stdin:
        v = next(verdicts) if has_golden(items[k][0]) else None
        out[k] = GoldenResult(v.pass_rate, v.correct, v.status) if v else GoldenResult(0.0, False, "fail")
    return out  # type: ignore[return-value]
