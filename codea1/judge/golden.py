"""Whether code passes a problem's golden tests: one path for every place that asks.

The golden mode's training reward (`codea1.train.loop`), validation during training
(`codea1.train.validation`), `codea1 eval code` and `eval select` (`codea1.eval`) and
`Judge.evaluate_golden_many` all score (problem, program) pairs with `golden_results`,
each program built by `golden_item`: the problem's assumed imports, then the extracted
code (`Problem.program`), as the reference's golden baseline runs a candidate after the
reference's imports, so a completion that omits them is not failed for it.

Functions: the program runs with the golden test program, then a check that the entry
point exists, then each golden assert as a call. Stdin problems (`Problem.kind`): the
program runs on each golden input and its outputs are compared in this process (a
problem's checker runs apart, on outputs already printed). Either way a `GoldenResult`:
`passed` (all of it holds), `pass_rate` (the share of golden tests passed, the golden
baseline's reward; 1/0 for a function problem that only has a test program), `status`,
`detail`, `wall_s`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codea1.data.check import defines_call, golden_call, program_with_tests
from codea1.data.stdin_io import checker_of, golden_io_tests, outputs_match, run_limits, tolerance_of
from codea1.sandbox import Job, Limits, to_source
from codea1.sandbox.stdio import DEFAULT_MAX_OUTPUT_BYTES, checker_job, checker_verdicts, program_outputs, stdin_job

if TYPE_CHECKING:
    from codea1.data import Problem
    from codea1.sandbox import RunResult

__all__ = ["GoldenResult", "StdinSettings", "golden_item", "golden_items", "golden_job", "golden_results",
           "has_golden", "stdin_limits", "verdict_of"]


@dataclass(frozen=True)
class GoldenResult:
    """A program's verdict on its problem's golden tests (module docstring)."""

    passed: bool
    status: str  # pass | fail | no-function | error | timeout | infra
    detail: str | None = None  # why not, when not passed
    pass_rate: float = 0.0
    wall_s: float = 0.0

    @property
    def correct(self) -> bool:
        """`passed`, under the name pass@k and validation count it by."""
        return self.passed

    @property
    def infra(self) -> bool:
        """A sandbox failure: no verdict on the code."""
        return self.status == "infra"


@dataclass(frozen=True)
class StdinSettings:
    """`time_scale` multiplies a problem's time limit per input (`meta.time_limit_s`;
    without one, the judge's `limits.call_timeout_s`); the result is capped at the judge's
    `limits.timeout_s` (a program's budget on functions). `max_output_bytes`: what one run
    may print."""

    time_scale: float = 1.0
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    @classmethod
    def of(cls, config: Any) -> "StdinSettings":
        """The settings a judge config gives (`judge.stdin_time_scale`, `judge.stdin_max_output_mb`)."""
        return cls(config.stdin_time_scale, int(config.stdin_max_output_mb * 2**20))


def stdin_limits(problem: Problem, limits: Limits, settings: StdinSettings = StdinSettings()) -> Limits:
    """The limits of one run of a program of `problem`: the time limit per input, scaled by
    the judge's `time_scale`, as the call's (`stdin_io.run_limits`)."""
    return run_limits(problem, limits, settings.time_scale)


def has_golden(problem: Problem) -> bool:
    return bool(problem.tests) or bool(problem.test_program)


def golden_item(problem: Problem, code: str) -> tuple[Problem, str]:
    """(problem, the program its golden tests run): the problem's imports, then `code`."""
    return problem, problem.program(code)


def golden_items(problems: Sequence[Problem], codes: Sequence[Sequence[str]]) -> list[tuple[Problem, str]]:
    """`golden_item` of each extracted code of each problem's group, flattened in order."""
    return [golden_item(p, c) for p, group in zip(problems, codes) for c in group]


def _short(text: str | None, limit: int = 300) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def golden_job(problem: Problem, code: str, limits) -> Any:
    """The sandbox job that checks ``code`` against the problem's golden tests."""
    calls = [defines_call(problem.entry_point)] + [golden_call(t, i) for i, t in enumerate(problem.tests)]
    return Job(program=program_with_tests(code, problem.test_program), calls=calls, limits=limits)


def verdict_of(run: RunResult) -> GoldenResult:
    """A pass only when the program ran clean, defined the function and every call held;
    `pass_rate` counts the golden asserts that held (a defined function is needed)."""
    if run.status == "infra":
        return GoldenResult(False, "infra", _short(run.infra_error), wall_s=run.wall_s)
    if not run.program_ok:
        status = "timeout" if run.status == "timeout" else "error"
        return GoldenResult(False, status, _short(run.program_error or run.status), wall_s=run.wall_s)
    if not run.calls or run.calls[0].status != "ok" or to_source(run.calls[0].value) != "True":
        return GoldenResult(False, "no-function", "the code does not define the entry point", wall_s=run.wall_s)
    tests = run.calls[1:]
    rate = sum(1 for c in tests if c.status == "ok") / len(tests) if tests else 1.0
    for index, call in enumerate(tests):
        if call.status != "ok":
            status = "timeout" if call.status == "timeout" else "fail"
            return GoldenResult(False, status, _short(f"golden test {index}: {call.error or call.status}"),
                                rate, run.wall_s)
    return GoldenResult(True, "pass", None, rate, run.wall_s)


def golden_results(executor, items: Sequence[tuple[Problem, str]],
                   limits: Limits | Sequence[Limits | None] | None = None,
                   settings: StdinSettings | None = None) -> list[GoldenResult]:
    """The `GoldenResult` of each (problem, program) pair (`golden_item`), either kind of
    problem, all runs in parallel. `limits`: one for all or one per pair (None: the
    executor's, for functions). A problem without golden tests fails ("no golden tests")."""
    settings = settings or StdinSettings()
    per_item = list(limits) if isinstance(limits, Sequence) else [limits] * len(items)
    out: list[GoldenResult | None] = [None] * len(items)
    jobs, places, stdin = [], [], {}
    for k, ((problem, program), lim) in enumerate(zip(items, per_item)):
        golden = golden_io_tests(problem) if problem.kind == "stdin" and has_golden(problem) else None
        if not has_golden(problem) or golden == []:
            out[k] = GoldenResult(False, "fail", "no golden tests")
            continue
        if golden is not None:
            lim = lim or Limits()
            stdin[k] = (golden, lim)
            jobs.append(stdin_job(program, [t.input for t in golden], stdin_limits(problem, lim, settings),
                                  settings.max_output_bytes))
        else:
            jobs.append(golden_job(problem, program, lim))
        places.append(k)
    runs = dict(zip(places, executor.run_many(jobs) if jobs else []))
    checks = _stdin_checks(executor, {k: (items[k][0], *stdin[k], runs[k]) for k in stdin})
    for k in places:
        if k in stdin:
            out[k] = _stdin_verdict(items[k][0], stdin[k][0], runs[k], checks.get(k))
        else:
            out[k] = verdict_of(runs[k])
    return out  # type: ignore[return-value]


def _stdin_checks(executor, work: dict[int, tuple]) -> dict[int, RunResult]:
    """The checker's run on each printed output (`checker_job`), for stdin problems that
    have a checker (`work`: place -> (problem, golden tests, limits, run))."""
    places, jobs = [], []
    for k, (problem, golden, limits, run) in work.items():
        checker = checker_of(problem)
        if checker is None or run.status == "infra":
            continue
        outs = program_outputs(run, len(golden))
        jobs.append(checker_job(checker, [(t.input, t.output, o.stdout) for t, o in zip(golden, outs)], limits))
        places.append(k)
    return dict(zip(places, executor.run_many(jobs) if jobs else []))


def _stdin_verdict(problem: Problem, golden, run: RunResult, checker_run: RunResult | None) -> GoldenResult:
    for lost in (run, checker_run):  # (a lost checker run is no rejection)
        if lost is not None and lost.status == "infra":
            return GoldenResult(False, "infra", lost.infra_error, wall_s=run.wall_s)
    if not run.program_ok:
        return GoldenResult(False, "error", run.program_error or run.status, wall_s=run.wall_s)
    tolerance, passed, first = tolerance_of(problem), 0, None
    checked = None if checker_run is None else checker_verdicts(checker_run, len(golden))
    for k, (test, out) in enumerate(zip(golden, program_outputs(run, len(golden)))):
        if out.ok and (checked[k] if checked is not None else outputs_match(out.stdout, test.output, tolerance)):
            passed += 1
        elif first is None:
            status = "timeout" if out.status == "timeout" else "fail"
            why = out.error if not out.ok else f"wrong output {out.stdout[:80]!r}"
            first = (status, f"golden test {k}: {why}")
    if first is None:
        return GoldenResult(True, "pass", None, 1.0, run.wall_s)
    return GoldenResult(False, first[0], first[1], passed / len(golden), run.wall_s)
