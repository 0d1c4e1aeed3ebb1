"""Whether code passes a problem's golden tests: the sandbox job and its verdict.

One definition for every place that asks: `codea1 eval code` (`codea1.eval.code`, which
re-exports both names), validation during training (`Judge.evaluate_golden_many`,
`codea1.train.golden`) and `codea1 eval select`. The code (after the problem's imports)
runs with the golden test program, then every golden assert as a separate call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codea1.data.check import defines_call, golden_call, program_with_tests
from codea1.sandbox import Job, to_source

if TYPE_CHECKING:
    from codea1.data import Problem


@dataclass
class Verdict:
    passed: bool
    status: str  # pass | fail | no-function | error | timeout | infra
    detail: str | None = None


def _short(text: str | None, limit: int = 300) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def golden_job(problem: Problem, code: str, limits) -> Any:
    """The sandbox job that checks ``code`` against the problem's golden tests."""
    calls = [defines_call(problem.entry_point)] + [golden_call(t, i) for i, t in enumerate(problem.tests)]
    return Job(program=program_with_tests(code, problem.test_program), calls=calls, limits=limits)


def verdict_of(run) -> Verdict:
    """A pass only when the program ran clean, defined the function and every call held."""
    if run.status == "infra":
        return Verdict(False, "infra", _short(run.infra_error))
    if not run.program_ok:
        status = "timeout" if run.status == "timeout" else "error"
        return Verdict(False, status, _short(run.program_error or run.status))
    if not run.calls or run.calls[0].status != "ok" or to_source(run.calls[0].value) != "True":
        return Verdict(False, "no-function", "the code does not define the entry point")
    for index, call in enumerate(run.calls[1:]):
        if call.status != "ok":
            status = "timeout" if call.status == "timeout" else "fail"
            return Verdict(False, status, _short(f"golden test {index}: {call.error or call.status}"))
    return Verdict(True, "pass")
