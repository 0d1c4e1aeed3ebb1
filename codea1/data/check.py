"""Checking a problem set: does every reference run, and pass its own golden tests?

One sandbox run per problem: the reference followed by its golden test program (if
any), then the golden `tests` as calls. A problem whose run fails gets a second run of
the reference alone, to tell "the reference is broken" from "the test program rejects
the reference".
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codea1.data.problem import Problem
from codea1.sandbox import Executor, Job, Limits, encode, values_equal
from codea1.sandbox.stdio import DEFAULT_MAX_OUTPUT_BYTES
from codea1.sandbox.types import GOLDEN_MEMORY_MB, GOLDEN_TIMEOUT_S

if TYPE_CHECKING:
    from codea1.sandbox import RunResult


@dataclass
class RowCheck:
    """The verdict on one problem: `status` is ok, broken, or unchecked (sandbox failure);
    `golden_tests`: how many it has (its asserts, plus one for a test program; a standard-input
    problem's input/output pairs). With none, "ok" says only that its reference runs."""

    id: str
    status: str
    reasons: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    golden_tests: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def golden_call(test: str, index: int) -> str:
    """A golden test statement as a call expression: runs it as written, raises if it fails."""
    return f"exec(compile({test!r}, '<golden test {index}>', 'exec'), globals())"


def defines_call(entry_point: str) -> str:
    return f"callable(globals().get({entry_point!r}))"


def program_with_tests(code: str, test_program: str | None) -> str:
    """Candidate (or reference) code followed by a golden test program, the way it is run."""
    if not test_program:
        return code
    return code.rstrip() + "\n\n" + test_program


#: A problem without a reference (CodeContests rows without Python 3, LiveCodeBench, TACO rows without solutions).
NO_REFERENCE = "no reference solution (meta.no_reference): for evaluation, not training"


def _short(text: str | None, limit: int = 160) -> str:
    text = (text or "").strip().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _status_reason(run: RunResult, what: str) -> str:
    if run.status == "timeout":
        return f"{what} ran out of time"
    if run.status == "memory":
        return f"{what} ran out of memory"
    if run.status == "output-limit":
        return f"{what} printed more than the output limit"
    return f"{what} failed: {_short(run.program_error or run.stderr)}"


def _checker_reason(run: RunResult, calls: int) -> str | None:
    """Why a problem's checker (`meta.checker`) gave no verdict on the reference's outputs,
    or None: its module does not run, or `check` raised (a checker without a `check`
    raises NameError on every call)."""
    if not run.program_ok:
        return "meta.checker fails: " + _status_reason(run, "its module")
    for index, call in enumerate(list(run.calls)[:calls]):
        if call.status not in ("ok", "not-run"):
            return f"meta.checker fails on golden test {index}: {_short(call.error or call.status, 100)}"
    return None


def _check_stdin(problems: Sequence[Problem], ex: Executor, limits: Limits, time_scale: float,
                 max_output_bytes: int) -> list[RowCheck]:
    """Stdin problems: the reference on every golden input, each output compared here (the
    problem's tolerance; its checker, run apart, where it has one), each run under the
    limits the training judge gives it (`stdin_io.run_limits`, its `time_scale`) and its
    output cap, the checker as the judge runs it (`checker_job`)."""
    from codea1.data.stdin_io import checker_of, golden_io_tests, outputs_match, run_limits, tolerance_of
    from codea1.sandbox.stdio import checker_job, checker_verdicts, program_outputs, stdin_job

    tests = [golden_io_tests(p) for p in problems]
    each = [run_limits(p, limits, time_scale) for p in problems]
    runs = ex.run_many([stdin_job(p.program(p.reference), [t.input for t in golden], lim, max_output_bytes)
                        for p, golden, lim in zip(problems, tests, each)])
    outs = [program_outputs(run, len(golden)) for run, golden in zip(runs, tests)]
    checked = [k for k, p in enumerate(problems) if checker_of(p) is not None and runs[k].program_ok]
    checks = dict(zip(checked, ex.run_many([
        checker_job(checker_of(problems[k]) or "", [(t.input, t.output, o.stdout) for t, o in zip(tests[k], outs[k])],
                    each[k]) for k in checked])))
    results = []
    for k, (p, run) in enumerate(zip(problems, runs)):
        check = RowCheck(id=p.id, status="ok", wall_s=run.wall_s, golden_tests=len(tests[k]))
        lost = next((r for r in (run, checks.get(k)) if r is not None and r.status == "infra"), None)
        if lost is not None:
            check.status = "unchecked"
            check.reasons.append(f"sandbox infrastructure error: {_short(lost.infra_error)}")
            results.append(check)
            continue
        checker_run = checks.get(k)
        checker_fails = None if checker_run is None else _checker_reason(checker_run, len(tests[k]))
        if not p.reference.strip():
            check.reasons.append(NO_REFERENCE)
        elif not run.program_ok:
            check.reasons.append(_status_reason(run, "the reference"))
        elif checker_fails is not None:
            check.reasons.append(checker_fails)
        else:
            by_checker = None if checker_run is None else checker_verdicts(checker_run, len(tests[k]))
            for index, (test, out) in enumerate(zip(tests[k], outs[k])):
                right = (by_checker[index] if by_checker is not None
                         else outputs_match(out.stdout, test.output, tolerance_of(p)))
                if not out.ok:
                    check.reasons.append(f"golden test {index} fails ({out.status}: {_short(out.error, 100)})")
                elif not right:
                    check.reasons.append(f"golden test {index} fails (prints {_short(out.stdout, 60)!r}, "
                                         f"expected {_short(test.output, 60)!r})")
        check.status = "broken" if check.reasons else "ok"
        results.append(check)
    return results

#: What a reference module that raises means for training (`codea1.judge.program_scoring`).
CANNOT_CHECK_TESTS = ("its module raises when run: the judge (as the Code-A1 reference) swallows the error and "
                      "checks none of the tests written for this row (no test is valid or invalid, the code "
                      "is valid when its own module runs, and its reward comes from the Mistake Book alone)")


def check_problems(
    problems: Sequence[Problem],
    executor: Executor | None = None,
    limits: Limits | None = None,
    workers: int | None = None,
    *,
    stdin_time_scale: float = 1.0,
    stdin_max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> list[RowCheck]:
    """Check every problem in the sandbox; one `RowCheck` per problem, in order. A stdin
    problem's runs: the training judge's `judge.stdin_time_scale` and output cap (here in
    bytes), as `codea1.judge.golden.StdinSettings` holds them."""

    if limits is None:
        limits = Limits(timeout_s=GOLDEN_TIMEOUT_S, memory_mb=GOLDEN_MEMORY_MB)
    with ExitStack() as stack:
        ex = executor if executor is not None else stack.enter_context(Executor(workers=workers, limits=limits))
        stdin = [k for k, p in enumerate(problems) if p.kind == "stdin"]
        if stdin:  # (a stdin problem runs on its inputs: `_check_stdin`)
            found = dict(zip(stdin, _check_stdin([problems[k] for k in stdin], ex, limits, stdin_time_scale,
                                                 stdin_max_output_bytes)))
            rest = [p for p in problems if p.kind != "stdin"]
            others = iter(check_problems(rest, ex, limits) if rest else [])
            return [found[k] if k in found else next(others) for k in range(len(problems))]
        jobs = [
            Job(
                program=program_with_tests(p.program(p.reference), p.test_program),
                calls=[defines_call(p.entry_point)] + [golden_call(t, i) for i, t in enumerate(p.tests)],
                limits=limits,
            )
            for p in problems
        ]
        runs = ex.run_many(jobs)
        results = [_verdict(p, r) for p, r in zip(problems, runs)]
        # Second look at failed programs that had a test program: is the reference itself broken?
        retry = [
            i for i, (p, r) in enumerate(zip(problems, runs))
            if p.test_program and p.reference.strip() and r.status != "infra" and not r.program_ok
        ]
        if retry:
            alone = ex.run_many([
                Job(program=problems[i].program(problems[i].reference), calls=[defines_call(problems[i].entry_point)],
                    limits=limits)
                for i in retry
            ])
            for i, run in zip(retry, alone):
                if run.status != "infra" and not run.program_ok:
                    results[i].reasons.insert(0, _status_reason(run, "the reference alone"))
                    if run.status in ("error", "memory"):
                        results[i].reasons.insert(1, "the reference cannot check its tests: " + CANNOT_CHECK_TESTS)
    return results


def _verdict(problem: Problem, run: RunResult) -> RowCheck:
    check = RowCheck(id=problem.id, status="ok", wall_s=run.wall_s,
                     golden_tests=len(problem.tests) + bool(problem.test_program))
    if run.status == "infra":
        check.status = "unchecked"
        check.reasons.append(f"sandbox infrastructure error: {_short(run.infra_error)}")
        return check
    if not problem.reference.strip():  # (its golden tests ran on the imports alone)
        check.status = "broken"
        check.reasons.append(NO_REFERENCE)
        return check
    what = "reference + test program" if problem.test_program else "the reference"
    if not run.program_ok:
        check.reasons.append(_status_reason(run, what))
        if not problem.test_program and run.status in ("error", "memory"):
            check.reasons.append("the reference cannot check its tests: " + CANNOT_CHECK_TESTS)
    elif run.calls and (run.calls[0].status != "ok" or not values_equal(run.calls[0].value, encode(True))):
        check.reasons.append(f"the reference does not define function {problem.entry_point!r}")
    for index, (test, call) in enumerate(zip(problem.tests, run.calls[1:])):
        if call.status == "not-run":
            continue
        if call.status != "ok":
            reason = "timed out" if call.status == "timeout" else _short(call.error, 100)
            check.reasons.append(f"golden test {index} fails ({reason}): {_short(test, 100)}")
    if run.program_ok and len(run.calls) < 1 + len(problem.tests):
        check.reasons.append("the sandbox returned fewer call results than calls")
    if check.reasons:
        check.status = "broken"
    return check
