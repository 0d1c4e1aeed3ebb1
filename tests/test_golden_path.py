"""One golden path (`codea1.judge.golden`): the golden mode's training reward, validation,
`codea1 eval code` and `Judge.evaluate_golden_many` score a code alike, after the problem's
imports (the reference's golden baseline runs a candidate after the reference's imports)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from codea1.data import Problem
from codea1.data.stdin_io import io_test
from codea1.eval.code import CodeEvalConfig, _golden_rows
from codea1.judge import GoldenResult, Judge, JudgeConfig
from codea1.judge.golden import golden_item, golden_items, golden_results
from codea1.sandbox import Executor, Limits

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the sandbox needs fork")

LIMITS = Limits(timeout_s=10.0, call_timeout_s=5.0)
# A stdin problem whose assumed imports the code relies on (it never imports sys itself).
ECHO = Problem(id="S/echo", question="Print the input doubled.", entry_point="", kind="stdin",
               imports="import sys", reference="import sys\nprint(2 * int(sys.stdin.read()))\n",
               tests=[io_test("2\n", "4\n"), io_test("5\n", "10\n")], meta={"time_limit_s": 2.0})
ECHO_CODE = "print(2 * int(sys.stdin.read()))\n"
TYPED = Problem(id="t/first", question="", entry_point="first", imports="from typing import List",
                reference="from typing import List\ndef first(xs: List[int]) -> int:\n    return xs[0]\n",
                tests=["assert first([3, 4]) == 3", "assert first([7]) == 7"])
TYPED_CODE = "def first(xs: List[int]) -> int:\n    return xs[0]\n"


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=LIMITS, preload=()) as ex:
        yield ex


def test_the_judge_runs_a_stdin_code_after_the_problems_imports(executor):
    """`Judge.evaluate_golden_many` used to hand stdin problems the bare code while training
    and `eval code` ran it after the imports, so a code that relies on `import sys` passed
    one and failed the other. Fault tried: the old stdin path (this test failed: the judge
    failed it: `fail`, golden test 0: NameError: name 'sys' is not defined)."""
    judge = Judge(executor, JudgeConfig(limits=LIMITS, golden_limits=LIMITS))
    (result,) = judge.evaluate_golden_many([(ECHO, f"```python\n{ECHO_CODE}```")])
    assert result.passed and result.status == "pass" and result.pass_rate == 1.0
    assert not judge.evaluate_golden(ECHO, "print(int(sys.stdin.read()))").passed


def test_training_validation_eval_and_the_judge_give_one_result(executor):
    """The same codes through each caller's entry: the same `GoldenResult`s (one class,
    with the training reward's `pass_rate` and the verdict's `detail`). Fault tried: eval
    code's rows built from `(p, code)` without the imports (the rows said `error`)."""
    wrong_typed = "def first(xs: List[int]) -> int:\n    return xs[-1]\n"
    problems, codes = [TYPED, ECHO], [[TYPED_CODE, wrong_typed], [ECHO_CODE, "print(0)\n"]]
    training = golden_results(executor, golden_items(problems, codes), LIMITS)
    judge = Judge(executor, JudgeConfig(limits=LIMITS, golden_limits=LIMITS))
    judged = judge.evaluate_golden_many([(p, c) for p, group in zip(problems, codes) for c in group])
    key = [(r.passed, r.status, r.detail, r.pass_rate) for r in training]
    assert [(r.passed, r.status, r.detail, r.pass_rate) for r in judged] == key
    assert [(r.correct, r.status) for r in training] == [(True, "pass"), (False, "fail"), (True, "pass"),
                                                          (False, "fail")]
    assert [r.pass_rate for r in training] == [1.0, 0.5, 1.0, 0.0]
    samples = [[SimpleNamespace(text=f"```python\n{c}```", truncated=False) for c in group] for group in codes]  # (a Sample's)
    ref = {p.id: (0.0, None) for p in problems}
    rows = _golden_rows(executor, problems, samples, ref, CodeEvalConfig(n=2, memory_mb=1024))
    assert [(r["passed"], r["status"]) for p in problems for r in rows[p.id]] == [(r.passed, r.status) for r in training]
    assert all(isinstance(r, GoldenResult) for r in training + judged)


def test_a_problem_without_golden_tests_fails_the_reward_and_is_refused_by_the_judge(executor):
    bare = Problem(id="t/bare", question="", entry_point="f", reference="def f():\n    return 1\n")
    (result,) = golden_results(executor, [golden_item(bare, bare.reference)], LIMITS)
    assert (result.passed, result.status, result.pass_rate) == (False, "fail", 0.0)
    with pytest.raises(ValueError, match="no golden tests"):
        Judge(executor, JudgeConfig(limits=LIMITS)).evaluate_golden(bare, bare.reference)
