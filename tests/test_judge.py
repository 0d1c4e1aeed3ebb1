"""The judge end to end on the real sandbox: validation, attack, rewards, Mistake Book update."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from codea1.data import Problem
from codea1.judge import (
    DUPLICATE,
    REFERENCE_RAISED,
    UNPARSABLE,
    WRONG_EXPECTATION,
    Judge,
    JudgeConfig,
    ProblemRollout,
)
from codea1.judge.judge import _REFERENCE_PRIORITY
from codea1.sandbox import Executor, Limits, RunResult

LIMITS = Limits(timeout_s=10.0, call_timeout_s=0.5)

ADD = Problem(
    id="t/add",
    question="def add(a, b): ...",
    entry_point="add",
    reference="def add(a, b):\n    return a + b\n",
    tests=["assert add(1, 2) == 3", "assert [add(0, 0)][0] == 0"],
)
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "def add(a, b):\n    return a - b if b > 5 else a + b\n"
SUITE = (
    "Tests:\n```python\n"
    "assert add(1, 2) == 3\n"          # valid
    "assert add(1, 9) == 11\n"         # wrong expectation (10), still used
    "assert add(1, 9) == 10\n"         # duplicate call
    "assert add(2, 2) == 5\n"          # wrong expectation (4), still used
    "assert add('a', 1) == 'a1'\n"     # reference raises
    "print(1)\n"                       # not a test: ignored (judge.strict_lines: unparsable)
    "```\n"
)


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=LIMITS) as ex:
        yield ex


@pytest.fixture
def judge(executor):
    return Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS))


class CountingExecutor:
    """Wraps an executor to record every job submitted (and optionally damage results)."""

    def __init__(self, inner, damage=None):
        self.inner, self.damage, self.submitted, self.results = inner, damage, [], []

    def submit(self, job, priority=0.0):
        self.submitted.append((job, priority))
        inner = self.inner.submit(job, priority=priority)
        inner.add_done_callback(lambda f: self.results.append((job, f.result())))
        if self.damage is None:
            return inner
        outer = Future()
        inner.add_done_callback(lambda f: outer.set_result(self.damage(job, f.result())))
        return outer

    @property
    def jobs(self):
        return [job for job, _ in self.submitted]

    @property
    def references(self):
        return [job for job, priority in self.submitted if priority >= _REFERENCE_PRIORITY]

    @property
    def candidates(self):
        return [job for job, priority in self.submitted if priority < _REFERENCE_PRIORITY]


def test_a_step_is_scored_exactly_per_the_spec(judge):
    mb = ["assert add(3, 7) == 10"]
    (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD, BAD], [[SUITE, "assert add(0, 0) == 0"]] * 2, mb)])
    assert r.usable and r.code_valid == [True, True]
    bad_suite = r.suites[1][0]
    # the reference: valid counts every kept test, the two corrected ones too (they also count as invalid)
    assert (bad_suite.valid, bad_suite.invalid) == (3, 4)
    assert bad_suite.invalid_kinds == {WRONG_EXPECTATION: 2, DUPLICATE: 1, REFERENCE_RAISED: 1}
    assert [t.kind for t in bad_suite.tests] == [None, WRONG_EXPECTATION, DUPLICATE, WRONG_EXPECTATION, REFERENCE_RAISED]
    assert [t.passed for t in bad_suite.tests] == [True, False, None, True, None]
    assert bad_suite.tests[1].normalized == "assert add(1, 9) == 10"  # corrected by the reference
    assert "TypeError" in bad_suite.tests[4].reason
    # by hand: valid_ratio = min(3/8, 1 - 4/8); kept F/T: gen pass 2/3, gen fail 1/8;
    # BAD fails the Mistake Book test (3 - 7): mb pass 0
    assert bad_suite.valid_ratio == pytest.approx(3 / 8)
    assert bad_suite.gen_pass_rate == pytest.approx(2 / 3)
    assert bad_suite.gen_fail_rate == pytest.approx(1 / 8)
    assert bad_suite.mb_pass_rate == 0.0
    assert bad_suite.pass_score == pytest.approx((0 + 2 / 3) / 2)
    assert bad_suite.attack == pytest.approx((1 / 8 - 1 + 1) / 2)
    assert r.test_rewards[1][0] == pytest.approx(0.5 * 3 / 8 + 0.5 * 1 / 16)
    # second suite: one valid test, passed; only 1 valid of G=8
    assert r.suites[1][1].pass_score == pytest.approx((0 + 1) / 2)
    assert r.code_rewards[1] == pytest.approx(((1 / 3) + 0.5) / 2)
    # GOOD passes everything: pass = (1 + 1) / 2 in both suites, attack = (0 - 0 + 1) / 2
    assert r.code_rewards[0] == pytest.approx(1.0)
    assert r.suites[0][0].attack == pytest.approx(0.5)
    assert r.mistakes_passed == [[True], [False]]
    update = r.mistake_update()
    assert dict(update.failed) == {"assert add(1, 9) == 10": 1}
    assert dict(update.passed) == {"assert add(3, 7) == 10": 1}


def test_one_run_per_reference_and_per_candidate_with_deduplicated_calls(executor):
    """judge.isolate_calls (the older execution); the default is tests/test_judge_one_program.py."""
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    other = Problem(id="t/neg", question="", entry_point="neg", reference="def neg(x):\n    return -x\n")
    suites = ["assert add(1, 2) == 3\nassert add(2, 2) == 4", "assert add(2, 2) == 4\nassert add(5, 5) == 2 * 5"]
    judge.judge_step([
        ProblemRollout(ADD, [GOOD, BAD, GOOD], [suites] * 3, ["assert add(2, 2) == 4"]),
        ProblemRollout(other, ["def neg(x): return -x"], [["assert neg(1) == -1"]]),
    ])
    refs, cands = counting.references, counting.candidates
    assert len(refs) == 2 and len(cands) == 3  # the two identical GOOD candidates share a run
    # reference: 3 distinct calls, then the expected values that are not plain literals
    assert list(refs[0].calls) == ["add(1, 2)", "add(2, 2)", "add(5, 5)", "2 * 5"]
    # (a problem's candidates are queued when its reference returns: `neg`'s may come first)
    cands = [job for job in cands if "def neg" not in job.program]
    assert len(cands) == 2
    # candidate: the definition check, then its distinct calls in the reference's order:
    # the Mistake Book's first, then the suites'
    assert list(cands[0].calls) == ["callable(globals().get('add'))", "add(2, 2)", "add(1, 2)", "add(5, 5)"]
    # it runs in the reference's namespace: the reference module, its functions deleted, then the code
    assert cands[0].program.startswith("try:\n    def add(a, b):\n        return a + b\nexcept Exception:\n    pass\n")
    assert "try:\n    del add\nexcept Exception:\n    pass\ndef add(a, b):\n    return a + b" in cands[0].program
    assert "4 ==" not in "".join(cands[0].calls)  # no expected value travels into the sandbox
    # judge.own_namespace: the candidate's code alone
    alone = CountingExecutor(executor)
    Judge(alone, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, own_namespace=True)).judge_step(
        [ProblemRollout(ADD, [GOOD], [suites])])
    assert alone.candidates[0].program.strip() == GOOD.split("\n", 1)[1].rsplit("\n", 1)[0].strip()


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("def add(a, b) return a", "does not run"),
        ("raise RuntimeError('boom')\ndef add(a, b):\n    return a + b", "does not run"),
        ("import no_such_module_xyz\ndef add(a, b):\n    return a + b", "does not run"),
    ],
)
def test_invalid_code_gets_zero_and_so_do_its_suites(judge, code, why):
    suite = "```python\nassert add(1, 1) == 2\n```\x00\x00"
    (r,) = judge.judge_step([ProblemRollout(ADD, [code, GOOD], [[suite], [suite]], ["assert add(1, 2) == 3"])])
    assert r.code_valid == [False, True]
    assert why in r.code_errors[0]
    assert r.code_rewards[0] == 0.0
    share = 2 / len(suite)
    assert r.test_rewards[0][0] == pytest.approx(-share)  # 0 against invalid code, minus the penalty
    assert r.suites[0][0].tests[0].passed is None
    assert r.mistakes_passed[0] is None
    assert r.test_rewards[1][0] == pytest.approx(0.5 * (1 / 8) + 0.5 * 0.5 - share)


@pytest.mark.parametrize("code", ["def plus(a, b):\n    return a + b", "add = 3"])
def test_a_module_that_runs_is_valid_code_even_without_the_function(judge, code):
    # the reference: valid = the module runs; then it fails every test (NameError, or an
    # int is not callable), and the test model earns its attack reward
    suite = "```python\nassert add(1, 1) == 2\n```"
    (r,) = judge.judge_step([ProblemRollout(ADD, [code], [[suite]], ["assert add(1, 2) == 3"])])
    assert r.code_valid == [True] and r.code_errors == [None]
    assert r.code_rewards == [0.0]  # pass = (0 + 0) / 2
    assert r.mistakes_passed == [[False]]
    # valid_ratio 1/8, attack = (gen_fail 1/8 - mb_fail 1 + 1) / 2 = 1/16
    assert r.test_rewards[0][0] == pytest.approx(0.5 * (1 / 8) + 0.5 * (1 / 16))
    assert dict(r.mistake_update().failed) == {"assert add(1, 1) == 2": 1}
    # judge.require_definition: the project's rule, no callable `add` is invalid code
    strict = Judge(judge.executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, require_definition=True))
    (r,) = strict.judge_step([ProblemRollout(ADD, [code], [[suite]], ["assert add(1, 2) == 3"])])
    assert r.code_valid == [False] and "does not define" in r.code_errors[0]
    assert r.test_rewards[0][0] == 0.0 and not r.mistake_update()


def test_the_candidate_sees_the_references_classes_imports_and_globals(judge):
    tree = Problem(id="t/tree", question="", entry_point="depth", reference=(
        "from collections import Counter\nLIMIT = 100\n"
        "class TreeNode:\n    def __init__(self, val=0, left=None):\n        self.val, self.left = val, left\n"
        "def depth(t):\n    return 0 if t is None else 1 + depth(t.left)\n"))
    code = ("def depth(t: TreeNode) -> int:\n    n = 0\n    while t is not None and n < LIMIT:\n"
            "        n, t = n + 1, t.left\n    return n + len(Counter())\n")
    suite = "assert depth(TreeNode(1, TreeNode(2))) == 2\nassert depth(None) == 0"
    (r,) = judge.judge_step([ProblemRollout(tree, [code], [[suite]])])
    assert r.code_valid == [True] and r.code_rewards == [1.0]
    # the reference's functions are deleted: a candidate calling the reference's `depth` fails
    (r,) = judge.judge_step([ProblemRollout(tree, ["def height(t):\n    return depth(t)"], [[suite]])])
    assert r.code_valid == [True] and r.code_rewards == [0.0]
    # judge.own_namespace: the code alone knows no TreeNode: it does not run
    alone = Judge(judge.executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, own_namespace=True))
    (r,) = alone.judge_step([ProblemRollout(tree, [code], [[suite]])])
    assert r.code_valid == [False] and "NameError" in r.code_errors[0]


def test_one_program_budget_fails_the_call_running_and_every_later_one(executor):
    # the reference: one budget (limits.timeout_s) for the candidate's whole program, no
    # limit per call; the Mistake Book's tests run first, then each suite's in order
    short = Limits(timeout_s=2.0, call_timeout_s=0.5)
    code = "def add(a, b):\n    if a == 2:\n        while True:\n            pass\n    return a + b\n"
    suites = ["assert add(0, 1) == 1\nassert add(2, 1) == 3\nassert add(3, 1) == 4", "assert add(4, 1) == 5"]
    rollout = ProblemRollout(ADD, [code], [suites], ["assert add(5, 1) == 6"])
    (r,) = Judge(executor, JudgeConfig(limits=short, reference_limits=short)).judge_step([rollout])
    assert r.code_valid == [True] and r.mistakes_passed == [[True]]
    assert [[t.passed for t in s.tests] for s in r.suites[0]] == [[True, False, False], [False]]
    assert dict(r.mistake_update().failed) == {
        "assert add(2, 1) == 3": 1, "assert add(3, 1) == 4": 1, "assert add(4, 1) == 5": 1}
    # suite 1: pass = (1 + 1/3) / 2, suite 2: (1 + 0) / 2
    assert r.code_rewards[0] == pytest.approx(((1 + 1 / 3) / 2 + 0.5) / 2)
    # judge.per_call_timeouts: the project's rule, each call its own limit and a resumed run
    per_call = Judge(executor, JudgeConfig(limits=short, reference_limits=short, per_call_timeouts=True))
    (r,) = per_call.judge_step([rollout])
    assert [[t.passed for t in s.tests] for s in r.suites[0]] == [[True, False, True], [True]]
    assert dict(r.mistake_update().failed) == {"assert add(2, 1) == 3": 1}


def test_a_reference_call_that_uses_the_whole_budget_makes_the_candidate_invalid(executor):
    # the reference validates a candidate's suites in that candidate's program, before the
    # candidate runs: a reference call that never ends leaves the candidate no time at all
    short = Limits(timeout_s=2.0, call_timeout_s=0.5)
    spin = Problem(id="t/spin", question="", entry_point="f",
                   reference="def f(n):\n    while n < 0:\n        pass\n    return n\n")
    good = "def f(n):\n    return n\n"
    suites = [["assert f(1) == 1\nassert f(-1) == -1"], ["assert f(2) == 2"]]
    # (one program per candidate, or the older execution: the same verdict; and the same when
    # the kernel's CPU limit, not the wall clock, ends the run: a CPU limit below the wall
    # clock's, or a loaded machine where the worker wakes late, CI's flake at ec29a79)
    for limits in (short, Limits(timeout_s=2.0, call_timeout_s=0.5, cpu_s=1.0)):
        for isolate in (False, True):
            (r,) = Judge(executor, JudgeConfig(limits=limits, reference_limits=limits,
                                               isolate_calls=isolate)).judge_step(
                [ProblemRollout(spin, [good, good], suites)])
            assert r.code_valid == [False, True] and "time budget" in r.code_errors[0], (limits, isolate)
    assert r.code_rewards == [0.0, 1.0] and r.test_rewards[0] == [0.0]
    per_call = Judge(executor, JudgeConfig(limits=short, reference_limits=short, per_call_timeouts=True))
    (r,) = per_call.judge_step([ProblemRollout(spin, [good, good], suites)])
    assert r.code_valid == [True, True] and r.suites[0][0].tests[1].kind == REFERENCE_RAISED


def test_exceptions_timeouts_and_lying_objects_are_failures(executor):
    judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, per_call_timeouts=True))
    code = (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n"
        "    if a == 1:\n        raise ValueError('no')\n"
        "    if a == 2:\n        while True:\n            pass\n"
        "    if a == 3:\n        return Liar(a + b)\n"
        "    if a == 4:\n        return Any()\n"
        "    if a == 5:\n        return float(a + b)\n"
        "    return a + b\n"
    )
    suite = "\n".join(f"assert add({a}, 1) == {a + 1}" for a in range(7))
    (r,) = judge.judge_step([ProblemRollout(ADD, [code], [[suite]])])
    assert r.code_valid == [True]
    # 6.0 == 6 under Python's `==` (the reference); the liars' own `__eq__` never decides
    assert [t.passed for t in r.suites[0][0].tests] == [True, False, False, False, False, True, True]
    assert r.suites[0][0].gen_fail_rate == pytest.approx(4 / 8)
    # judge.exact_types: the project's alternative, 6.0 is no int
    exact = Judge(judge.executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, exact_types=True,
                                              per_call_timeouts=True))
    (r,) = exact.judge_step([ProblemRollout(ADD, [code], [[suite]])])
    assert [t.passed for t in r.suites[0][0].tests] == [True, False, False, False, False, False, True]


def test_expected_values_are_evaluated_not_string_compared(judge):
    src = "assert add(0.1, 0.2) == 0.3\nassert add([1], [2]) == sorted([2, 1])\nassert add(1, 1) == int('x')\n"
    (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD], [[src]])])
    tests = r.suites[0][0].tests
    # 0.1 + 0.2 != 0.3: floats compare exactly unless a tolerance is configured
    assert [t.valid for t in tests] == [False, True, False]
    tolerant = Judge(judge.executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, float_atol=1e-6))
    (r2,) = tolerant.judge_step([ProblemRollout(ADD, [GOOD], [[src]])])
    assert [t.valid for t in r2.suites[0][0].tests] == [True, True, False]
    assert tests[2].kind == WRONG_EXPECTATION and "ValueError" in tests[2].reason
    assert tests[2].normalized == "assert add(1, 1) == 2" and tests[2].passed is True


def test_only_mistake_book_tests_and_nothing_at_all(judge):
    mb = ["assert add(1, 2) == 3", "assert add(10, 10) == 20"]
    (r,) = judge.judge_step([ProblemRollout(ADD, [BAD], [["no tests here", "```python\n```"]], mb)])
    s = r.suites[0][0]
    assert s.mb_pass_rate == pytest.approx(0.5) and s.pass_score == pytest.approx(0.5) and s.attack == 0.0
    assert s.invalid == 0  # no python block and no line starting with `assert`: no test at all
    assert r.suites[0][1].invalid == 0 and r.suites[0][1].valid_ratio == 0.0
    (r,) = judge.judge_step([ProblemRollout(ADD, [BAD], [["```python\n```"]])])
    assert (r.suites[0][0].pass_score, r.suites[0][0].attack, r.code_rewards[0], r.test_rewards[0][0]) == (0, 0, 0, 0)


def test_tests_must_call_the_function_under_test(executor):
    src = "assert abs(-1) == 1\nassert add(1, 1) == 2\n"
    # the reference counts `abs(-1) == 1` (every candidate passes it); judge.require_entry_point does not
    strict = Judge(executor, JudgeConfig(limits=LIMITS, require_entry_point=True))
    loose = Judge(executor, JudgeConfig(limits=LIMITS))
    assert strict.judge(ProblemRollout(ADD, [GOOD], [[src]])).suites[0][0].valid == 1
    assert loose.judge(ProblemRollout(ADD, [GOOD], [[src]])).suites[0][0].valid == 2


def test_reference_values_that_cannot_be_compared_make_the_test_invalid(judge):
    problem = Problem(id="t/gen", question="", entry_point="gen", reference="def gen(n):\n    return (i for i in range(n))\n")
    (r,) = judge.judge_step([ProblemRollout(problem, [problem.reference], [["assert gen(2) == [0, 1]"]])])
    t = r.suites[0][0].tests[0]
    assert t.kind == REFERENCE_RAISED and "cannot be compared" in t.reason


def test_broken_reference_makes_the_problem_unusable(executor):
    """judge.isolate_calls: a reference that does not run makes the problem unusable. (By
    default the reference's rule: every candidate's program fails at the import, zero
    rewards: tests/test_judge_one_program.py.)"""
    problem = Problem(id="t/broken", question="", entry_point="f", reference="import not_a_module_anywhere\ndef f(): return 1\n")
    judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    (r,) = judge.judge_step([ProblemRollout(problem, ["def f(): return 1"], [["assert f() == 1"]], ["assert f() == 1"])])
    assert not r.usable and "does not run" in r.reference_error and r.infra_error is None
    assert r.code_rewards == [0.0] and r.test_rewards == [[0.0]]
    assert not r.mistake_update()


def test_sandbox_failures_are_never_scored(executor):
    def damage(job, result):
        if job.one_process or (job.calls and job.calls[0].startswith("callable(")):  # a candidate's run
            return RunResult(status="infra", infra_error="worker died")
        return result

    for isolate in (False, True):
        judge = Judge(CountingExecutor(executor, damage), JudgeConfig(limits=LIMITS, isolate_calls=isolate))
        (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD], [["assert add(1, 2) == 3"]])])
        assert not r.usable and "worker died" in r.infra_error
        assert r.code_rewards == [0.0] and not r.mistake_update()


def test_strict_validity_pays_no_validity_for_a_wrong_expectation(executor):
    """judge.strict_validity: the project's alternative to item 1 (a corrected test counts only as invalid)."""
    judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, strict_validity=True))
    (r,) = judge.judge_step([ProblemRollout(ADD, [BAD], [[SUITE]])])
    suite = r.suites[0][0]
    assert (suite.valid, suite.invalid) == (1, 4)
    assert suite.valid_ratio == pytest.approx(1 / 8)  # min(1/8, 1 - 4/8)
    assert suite.gen_pass_rate == pytest.approx(2 / 3)  # the corrected tests still run


def test_strict_lines_and_strict_operator_count_what_the_reference_ignores(executor):
    """judge.strict_lines / judge.strict_operator: the project's readings of items 2 and 3."""
    suite = "```python\nprint(1)\nassert add(1, 2) != 4\nassert add(2, 2) == 4\n```"
    reference = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS))
    lines = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, strict_lines=True))
    operator = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, strict_operator=True))
    (r,) = reference.judge_step([ProblemRollout(ADD, [GOOD], [[suite]])])
    s = r.suites[0][0]  # `!= 4` reads as `== 4`: a wrong expectation, corrected to 3, kept
    assert (s.valid, s.invalid, s.invalid_kinds) == (2, 1, {WRONG_EXPECTATION: 1})
    assert s.tests[0].normalized == "assert add(1, 2) == 3"
    (r,) = lines.judge_step([ProblemRollout(ADD, [GOOD], [[suite]])])
    assert r.suites[0][0].invalid_kinds == {UNPARSABLE: 1, WRONG_EXPECTATION: 1}
    (r,) = operator.judge_step([ProblemRollout(ADD, [GOOD], [[suite]])])
    assert (r.suites[0][0].valid, r.suites[0][0].invalid_kinds) == (1, {UNPARSABLE: 1})


BOXES = Problem(
    id="t/boxes", question="def size(box): ...", entry_point="size",
    reference=("from collections import Counter\nclass Box:\n    def __init__(self, items):\n"
               "        self.items = items\ndef size(box):\n    return len(Counter(box.items))\n"),
)


def test_tests_may_use_the_programs_names_and_cannot_sabotage_each_other(executor):
    """Item 4: a test may use what the reference's module defines or imports (Box, Counter);
    the guard against sabotage is isolation (a fork per such expression), and the project's
    allow-list stays as judge.strict_tests."""
    uses_names = "assert size(Box([1, 1, 2])) == 2\nassert size(Box(list(Counter('aab')))) == 2\n"
    # (`size` is looked up before its argument rebinds it: the test itself passes)
    sabotage = "assert size(Box([5]) if globals().update(size=lambda box: 0) is None else None) == 1\n"
    plain = "assert size(Box([7, 8])) == 2\n"
    code = BOXES.reference  # a correct candidate
    judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    (r,) = judge.judge_step([ProblemRollout(BOXES, [code], [[uses_names, sabotage, plain]])])
    a, b, c = r.suites[0]
    assert (a.valid, a.invalid, b.valid, c.valid) == (2, 0, 1, 1)
    # the rebinding happened in a fork of its own: the reference's and the candidate's
    # `size` were intact for every other test
    assert [t.passed for s in (a, b, c) for t in s.tests] == [True, True, True, True]
    assert c.tests[0].normalized == "assert size(Box([7, 8])) == 2"
    strict = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, strict_tests=True))
    (r,) = strict.judge_step([ProblemRollout(BOXES, [code], [[uses_names, sabotage, plain]])])
    assert [s.valid for s in r.suites[0]] == [0, 0, 0]
    assert "uses `Box`" in r.suites[0][0].tests[0].reason


def test_mistake_update_counts_each_failing_candidate_and_suite(judge):
    wrong = "def add(a, b):\n    return 0\n"
    suites = ["assert add(1, 2) == 3\nassert add(2, 2) == 4", "assert add(1, 2) == 3"]
    mb = ["assert add(0, 0) == 0", "assert add(5, 5) == 10"]
    (r,) = judge.judge_step([ProblemRollout(ADD, [wrong, wrong, GOOD, "oops("], [suites] * 4, mb)])
    update = r.mistake_update()
    # add(1, 2) fails both wrong candidates in both of their suites: 2 x 2 (candidate, suite) pairs
    assert dict(update.failed) == {"assert add(1, 2) == 3": 4, "assert add(2, 2) == 4": 2}
    assert list(update.failed) == ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]  # in test order
    assert dict(update.passed) == {"assert add(0, 0) == 0": 3, "assert add(5, 5) == 10": 1}
    # mistakes.once_per_candidate: the project's alternative, once per failing candidate
    once = r.mistake_update(once_per_candidate=True)
    assert dict(once.failed) == {"assert add(1, 2) == 3": 2, "assert add(2, 2) == 4": 2}
    assert once.passed == update.passed


def test_rollout_shape_is_checked():
    with pytest.raises(ValueError, match="2 codes but 1 lists"):
        ProblemRollout(ADD, [GOOD, BAD], [["x"]])
    with pytest.raises(TypeError, match=r"tests\[0\] must be a list"):
        ProblemRollout(ADD, [GOOD], ["assert add(1, 1) == 2"])
    with pytest.raises(TypeError, match="codes must be a list of strings"):
        ProblemRollout(ADD, GOOD, [["x"]])


def test_evaluate_golden(judge):
    assert judge.evaluate_golden(ADD, GOOD).passed
    verdict = judge.evaluate_golden(ADD, "def add(a, b):\n    return a * b + 1\n")
    assert not verdict.passed and "golden test 1" in verdict.detail  # the 2nd (0-based 1); 1 * 2 + 1 == 3 passes
    assert "does not define" in judge.evaluate_golden(ADD, "def plus(): pass").detail
    with_program = Problem(
        id="t/prog", question="", entry_point="add", reference=ADD.reference,
        test_program="def check(f):\n    assert f(2, 3) == 5\ncheck(add)\n",
    )
    results = judge.evaluate_golden_many([(with_program, GOOD), (with_program, BAD), (ADD, BAD)])
    assert [g.passed for g in results] == [True, True, True]  # BAD is right below b = 6
    assert not judge.evaluate_golden(with_program, "def add(a, b):\n    return a").passed
    with pytest.raises(ValueError, match="no golden tests"):
        judge.evaluate_golden(Problem(id="t/none", question="", entry_point="f", reference="def f(): pass"), "x")


def test_failed_tests_say_how_they_failed(executor):
    judge = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, per_call_timeouts=True))
    code = "def add(a, b):\n    if a == 1:\n        raise ValueError('no')\n    if a == 2:\n        while True: pass\n    return a * b\n"
    suite = "assert add(1, 1) == 2\nassert add(2, 1) == 3\nassert add(3, 1) == 4\nassert add(2, 2) == 4\n"
    (r,) = judge.judge_step([ProblemRollout(ADD, [code], [[suite]])])
    failures = [t.failure for t in r.suites[0][0].tests]
    assert failures[0] == "ValueError: no"
    assert failures[1] == "timed out"
    assert failures[2] == "wrong value: 3"
    assert failures[3] == "timed out"  # after a time-out the run goes on in a fresh fork


def test_identical_candidates_share_a_run_but_keep_their_own_suites(judge):
    wrong = "def add(a, b):\n    return a * b\n"
    suites_a = ["assert add(2, 2) == 4"]  # a * b passes this one
    suites_b = ["assert add(1, 5) == 6"]  # and fails this one
    (r,) = judge.judge_step([ProblemRollout(ADD, [wrong, wrong], [suites_a, suites_b])])
    assert r.code_rewards == [1.0, 0.0]
    assert r.suites[0][0].attack == 0.0 and r.suites[1][0].attack == pytest.approx(1 / 8)
    assert dict(r.mistake_update().failed) == {"assert add(1, 5) == 6": 1}


def test_a_flooding_test_does_not_cost_other_tests_their_run(executor):
    loud = "def add(a, b):\n    if a == 7:\n        print('y' * 10**6)\n    return a + b\n"
    loud_ref = Problem(id="t/loud", question="", entry_point="add", reference=loud)
    suite_a = "assert add(7, 0) == 7\nassert add(1, 1) == 2"
    suite_b = "assert add(2, 2) == 4\nassert add(3, 3) == 6"
    # by default (the reference) printing never decides a verdict: the output is drained and dropped
    plain = Judge(executor, JudgeConfig(limits=LIMITS))
    for problem, code in ((loud_ref, GOOD), (ADD, loud)):
        (r,) = plain.judge_step([ProblemRollout(problem, [code], [[suite_a, suite_b]])])
        assert [t.passed for s in r.suites[0] for t in s.tests] == [True] * 4 and r.code_rewards == [1.0]
    # judge.isolate_calls with its limits as given (a flood stops the run)
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    (r,) = judge.judge_step([ProblemRollout(loud_ref, [GOOD], [[suite_a, suite_b]])])
    a, b = r.suites[0]
    assert a.tests[0].kind == REFERENCE_RAISED and "OutputLimit" in a.tests[0].reason
    assert [t.valid for t in a.tests[1:]] == [True] and [t.valid for t in b.tests] == [True, True]
    assert all(t.passed for t in b.tests)
    assert len(counting.jobs) == 3  # reference, its resume, candidate (the flood is not sent)
    # a candidate's flood ends its program: the reference has one run, later tests fail
    (r,) = judge.judge_step([ProblemRollout(ADD, [loud], [[suite_a + "\n" + suite_b]])])
    assert [t.passed for t in r.suites[0][0].tests] == [False, False, False, False]
    # judge.per_call_timeouts: the run is resumed without the flooding call
    resumed = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, per_call_timeouts=True))
    (r,) = resumed.judge_step([ProblemRollout(ADD, [loud], [[suite_a + "\n" + suite_b]])])
    assert [t.passed for t in r.suites[0][0].tests] == [False, True, True, True]
    assert "OutputLimit" in r.suites[0][0].tests[0].failure
    no_resume = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, resume_rounds=0, isolate_calls=True))
    (r,) = no_resume.judge_step([ProblemRollout(loud_ref, [GOOD], [[suite_a, suite_b]])])
    assert any(t.reason and "not run" in t.reason for s in r.suites[0] for t in s.tests)


def test_a_test_cannot_sabotage_the_candidate_for_other_tests(executor):
    helper = "def _check(x):\n    return True\ndef add(a, b):\n    assert _check(a)\n    return a + b\n"
    sabotage = "assert add(globals().update(_check=None) or 1, 1) == 2"
    suites = [sabotage, "assert add(2, 2) == 4"]
    strict = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, strict_tests=True))
    (r,) = strict.judge_step([ProblemRollout(ADD, [helper], [suites])])
    assert r.suites[0][0].tests[0].kind == UNPARSABLE and "globals" in r.suites[0][0].tests[0].reason
    assert r.code_rewards == [pytest.approx(0.5)]  # suite 2 passes; suite 1 has no test
    # the reference's rule: any name, and isolation instead. The rebinding breaks the
    # candidate within that test's own call only (the reference has no `_check`): suite 2 passes
    isolated = Judge(executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    (r,) = isolated.judge_step([ProblemRollout(ADD, [helper], [suites])])
    first = r.suites[0][0].tests[0]
    assert first.kind is None and first.passed is False and "not callable" in first.failure
    assert r.suites[0][1].tests[0].passed is True
    assert r.code_rewards == [pytest.approx(0.5)]
    # the reference's own execution (the default): one program, so the rebinding stays and
    # the later suite's test fails too
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step([ProblemRollout(ADD, [helper], [suites])])
    assert [row.tests[0].passed for row in r.suites[0]] == [False, False] and r.code_rewards == [0.0]


def test_a_sandbox_failure_while_resuming_makes_the_problem_unusable(executor):
    seen = []

    def damage(job, result):
        seen.append(job)
        if len(seen) > 2:  # the resume of the candidate run
            return RunResult(status="infra", infra_error="worker lost")
        return result

    loud = "def add(a, b):\n    if a == 7:\n        print('y' * 10**6)\n    return a + b\n"
    judge = Judge(CountingExecutor(executor, damage),
                  JudgeConfig(limits=LIMITS, reference_limits=LIMITS, per_call_timeouts=True))
    (r,) = judge.judge_step([ProblemRollout(ADD, [loud], [["assert add(7, 0) == 7\nassert add(1, 1) == 2"]])])
    assert len(seen) == 3 and not r.usable and "worker lost" in r.infra_error


def test_an_int_expectation_for_a_float_result_is_right_as_in_python(judge):
    half = Problem(id="t/half", question="", entry_point="half", reference="def half(x):\n    return x / 2\n")
    src = "assert half(4) == 2\nassert half(3) == 1\nassert half(2) == [1.0]\nassert half(2) == True\n"
    (r,) = judge.judge_step([ProblemRollout(half, ["def half(x):\n    return x // 2\n"], [[src]])])
    tests = r.suites[0][0].tests
    assert [t.valid for t in tests] == [True, False, False, False]  # (the last repeats the call half(2))
    assert tests[0].normalized == "assert half(4) == 2.0"
    assert tests[0].passed is True  # 2 == 2.0: the reference compares with Python's `==`
    # judge.exact_types: an int expectation still reads right for a float, the bool does not,
    # and the attack keeps exact types (2 is not 2.0)
    exact = Judge(judge.executor, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, exact_types=True))
    (r,) = exact.judge_step([ProblemRollout(half, ["def half(x):\n    return x // 2\n"], [[src]])])
    assert [t.valid for t in r.suites[0][0].tests] == [True, False, False, False]
    assert r.suites[0][0].tests[0].passed is False


def test_code_with_a_syntax_error_is_invalid_without_a_run(executor):
    """judge.isolate_calls (by default the program still runs: the reference checks the
    tests written against a candidate in the candidate's program, whatever its code)."""
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    (r,) = judge.judge_step([ProblemRollout(ADD, ["def add(a, b)\n    return a", GOOD], [["assert add(1, 1) == 2"]] * 2)])
    assert r.code_valid == [False, True]
    assert "SyntaxError: expected ':' (line 1)" in r.code_errors[0]
    assert len(counting.candidates) == 1  # only GOOD ran


def test_candidates_queued_together_go_longest_first_from_the_reference_time(executor):
    slow = Problem(id="t/slow", question="", entry_point="spin",
                   reference="def spin(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n")
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, own_namespace=True))
    few = ["assert spin(200000) == 0"]
    many = ["assert spin(200000) == 0\nassert spin(200001) == 0\nassert spin(200002) == 0"]
    code_a = "def spin(n):\n    return sum(range(n))\n"
    code_b = "def spin(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
    (r,) = judge.judge_step([ProblemRollout(slow, [code_a, code_b], [few, many])])
    assert r.code_valid == [True, True] and r.code_rewards[1] == pytest.approx(r.code_rewards[0])
    priorities = {job.program: p for job, p in counting.submitted if p < _REFERENCE_PRIORITY}
    # queued together; the candidate with three of the reference's three calls is expected
    # to take longer (by two calls' worth of the reference's time), so it goes first
    reference_cpu = next(run for job, run in counting.results if job.program == slow.reference).cpu_s
    a, b = priorities[code_a.strip()], priorities[code_b.strip()]  # (the extracted code: line breaks stripped)
    assert b - a == pytest.approx(2 * reference_cpu / 3)
    assert b > a


def test_candidates_queued_earlier_start_earlier_unless_expected_to_be_long(executor, monkeypatch):
    # A run that is long against all expectation (a mutant building huge numbers) must not
    # wait behind every candidate queued after it: the queue is first come, first served,
    # with a run expected to take t seconds moved t seconds ahead.
    clock = iter(range(0, 10_000, 100))  # each batch is queued 100 s after the one before
    monkeypatch.setattr("codea1.judge.judge._Runs.elapsed", lambda self: float(next(clock)))
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS))
    problems = [Problem(id=f"t/{i}", question="", entry_point="add", reference=ADD.reference) for i in range(4)]
    rollouts = [ProblemRollout(p, [GOOD, BAD], [[f"assert add({i}, 1) == {i + 1}"]] * 2) for i, p in enumerate(problems)]
    judge.judge_step(rollouts)
    batches: dict[str, list[float]] = {}
    order = []
    for job, priority in counting.submitted:
        if priority < _REFERENCE_PRIORITY:
            key = next(c for c in job.calls if c.startswith("add("))
            if key not in batches:
                order.append(key)
            batches.setdefault(key, []).append(priority)
    assert len(order) == 4 and all(len(b) == 2 for b in batches.values())
    for earlier, later in zip(order, order[1:]):
        assert min(batches[earlier]) > max(batches[later])


def test_candidates_that_differ_only_in_comments_and_layout_share_a_run(executor):
    """judge.isolate_calls (by default candidates share a run only when their whole
    programs, suites included, are the same)."""
    counting = CountingExecutor(executor)
    judge = Judge(counting, JudgeConfig(limits=LIMITS, reference_limits=LIMITS, isolate_calls=True))
    plain = "def add(a, b):\n    return a + b\n"
    commented = "# adds\ndef add(a,b):\n\n    return (a + b)  # the sum\n"
    other = "def add(a, b):\n    return b + a\n"
    suites = [["assert add(1, 2) == 3"], ["assert add(2, 2) == 4"], ["assert add(0, 5) == 5"]]
    (r,) = judge.judge_step([ProblemRollout(ADD, [plain, commented, other], suites)])
    assert len(counting.candidates) == 2  # `b + a` is another tree
    shared = next(job for job in counting.candidates if "# adds" not in job.program and "b + a" not in job.program)
    assert list(shared.calls[1:]) == ["add(1, 2)", "add(2, 2)"]  # the union of both candidates' calls
    assert r.code_valid == [True, True, True] and r.code_rewards == [1.0, 1.0, 1.0]
    assert [len(row[0].tests) for row in r.suites] == [1, 1, 1]


def _watching_judge(executor, seen: list, what, **config):
    """A judge whose every submit records `what()` (a setting in force during the step)."""

    class Watching(CountingExecutor):
        def submit(self, job, priority=0.0):
            seen.append(what())
            return super().submit(job, priority)

    return Judge(Watching(executor), JudgeConfig(limits=LIMITS, reference_limits=LIMITS, **config))


def test_the_garbage_collector_is_paused_during_a_step_and_restored(executor):
    import gc

    states: list = []
    judge = _watching_judge(executor, states, gc.isenabled)
    rollout = ProblemRollout(ADD, [GOOD], [["assert add(1, 1) == 2"]])
    assert gc.isenabled()
    judge.judge_step([rollout])
    assert states and not any(states) and gc.isenabled()
    gc.disable()
    try:
        judge.judge_step([rollout])
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


def test_threads_switch_promptly_during_a_step_and_the_interval_comes_back(executor):
    import sys

    from codea1.interpreter import HANDOFF_INTERVAL_S

    intervals: list = []
    judge = _watching_judge(executor, intervals, sys.getswitchinterval)
    before = sys.getswitchinterval()
    assert before > HANDOFF_INTERVAL_S
    judge.judge_step([ProblemRollout(ADD, [GOOD], [["assert add(1, 1) == 2"]])])
    assert intervals and all(i == pytest.approx(HANDOFF_INTERVAL_S, rel=0.01) for i in intervals)
    assert sys.getswitchinterval() == before


def test_the_switch_interval_can_be_left_alone_and_is_validated(executor):
    import sys

    intervals: list = []
    before = sys.getswitchinterval()
    judge = _watching_judge(executor, intervals, sys.getswitchinterval, switch_interval_s=None)
    judge.judge_step([ProblemRollout(ADD, [GOOD], [["assert add(1, 1) == 2"]])])
    assert intervals and all(i == before for i in intervals)
    for bad in (0, -1.0, 2.0, "fast", True):
        with pytest.raises(ValueError, match="switch_interval_s"):
            JudgeConfig(switch_interval_s=bad)


def test_an_object_without_eq_is_compared_by_class_and_attributes(judge):
    # reference defect, not reproduced: there the live objects compare by identity, so every
    # candidate fails `make(1) == Point(1)` and the Mistake Book stores
    # `assert make(1) == <__main__.Point object at 0x...>`, which does not parse
    point = Problem(id="t/point", question="", entry_point="make", reference=(
        "class Point:\n    def __init__(self, x):\n        self.x = x\ndef make(x):\n    return Point(x)\n"))
    right = "def make(x):\n    return Point(x)\n"
    wrong = "def make(x):\n    return Point(x + 1)\n"
    (r,) = judge.judge_step([ProblemRollout(point, [right, wrong], [["assert make(1) == Point(1)"]] * 2)])
    assert r.code_valid == [True, True] and r.code_rewards == [1.0, 0.0]
    assert all("object at 0x" not in test for test in r.mistake_update().failed)


def test_a_stored_test_keeps_its_backslashes_and_quotes(judge, tmp_path):
    # reference defect, not reproduced: there a failed test enters the Mistake Book as
    # repr(test)[1:-1], so `count_bs('a\\b')` is stored as `count_bs('a\\\\b')` and a right
    # candidate, counting two backslashes, fails it when it is replayed
    from codea1.mistakes import MistakeBook

    bs = Problem(id="t/bs", question="", entry_point="count_bs", reference="def count_bs(s):\n    return s.count(chr(92))\n")
    suite = "```python\nassert count_bs('a\\\\b') == 1\nassert count_bs(\"it's\") == 0\n```"
    (r,) = judge.judge_step([ProblemRollout(bs, ["def count_bs(s):\n    return -1\n"], [[suite]])])
    stored = list(r.mistake_update().failed)
    assert stored == ["assert count_bs('a\\\\b') == 1", 'assert count_bs("it\'s") == 0']
    with MistakeBook(tmp_path / "book.sqlite") as book:
        book.apply_step(1, {"t/bs": r.mistake_update()})
        replay = book.top("t/bs")
    right = "def count_bs(s):\n    return s.count(chr(92))\n"
    (r,) = judge.judge_step([ProblemRollout(bs, [right], [["no tests"]], replay)])
    assert r.mistakes_passed == [[True, True]] and r.code_rewards == [1.0]
