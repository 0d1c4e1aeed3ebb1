"""Issue 39: the judge runs each candidate as the Code-A1 reference does, as one program.

Each test says which fault it was tried against (the test failed under it).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from codea1.data import Problem
from codea1.data.check import CANNOT_CHECK_TESTS, check_problems
from codea1.judge import DUPLICATE, REFERENCE_RAISED, UNPARSABLE, WRONG_EXPECTATION, Judge, JudgeConfig, ProblemRollout
from codea1.judge.reading import read_reference_tests
from codea1.sandbox import Executor, Job, Limits
from codea1.sandbox._worker import _Output
from codea1.judge.golden import golden_items, golden_results

LIMITS = Limits(timeout_s=10.0, call_timeout_s=0.5)
ADD = Problem(id="t/add", question="", entry_point="add", reference="def add(a, b):\n    return a + b\n")
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
IDS = Problem(id="t/ids", question="", entry_point="next_id",
              reference="_n = [0]\ndef next_id():\n    _n[0] += 1\n    return _n[0]\n")
SUITE = "```python\nassert add(1, 2) == 3\nassert add(1, 9) == 10\nassert add(2, 2) == 4\n```"


def py(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture(scope="module")
def executor():
    with Executor(workers=2, limits=LIMITS) as ex:
        yield ex


@pytest.fixture
def judge(executor):
    return Judge(executor, JudgeConfig(limits=LIMITS))


def test_the_program_is_the_references_order_of_pieces(executor):
    """One job per candidate: imports, then the reference module, every suite test's CALL on
    the reference (a non-literal EXPECTED next to it), the deletion of the reference's
    functions, the candidate's module, the Mistake Book's CALLs, every test's CALL again.
    Fault tried: queuing the suites' calls before the book's (the order assert failed)."""
    seen = []

    class Recording:
        def submit(self, job, priority=0.0):
            seen.append(job)
            return executor.submit(job, priority=priority)

    suite = py("assert add(1, 2) == 3\nassert add(2, 2) == 2 * 2")
    Judge(Recording(), JudgeConfig(limits=LIMITS)).judge_step(
        [ProblemRollout(ADD, [GOOD], [[suite]], ["assert add(5, 5) == 10"])])
    (job,) = seen
    assert job.one_process and job.limits.call_timeout_s == job.limits.timeout_s and not job.limits.stop_on_output
    assert list(job.calls) == ["def add(a, b):\n    return a + b", "add(1, 2)", "add(2, 2)", "2 * 2",
                               "try:\n    del add\nexcept Exception:\n    pass", "def add(a, b):\n    return a + b",
                               "add(5, 5)", "add(1, 2)", "add(2, 2)"]
    assert job.statements == (0, 4, 5)
    assert dict(job.requires) == {1: (0,), 2: (0,), 3: (2,), 6: (5,), 7: (5, 1), 8: (5, 2)}


@pytest.mark.parametrize("how", ["sys.exit(0)", "exit()", "quit()", "os._exit(0)", "os.kill(os.getpid(), 9)",
                                 "raise KeyboardInterrupt"])
def test_an_exit_or_crash_in_one_call_fails_every_later_call(executor, how):
    """39.1: the reference runs a candidate's tests in one program, so an exit ends it.
    Fault tried: evaluating each call apart (isolate_calls semantics by default): the later
    tests passed and this test failed."""
    code = py(f"import os, sys\ndef add(a, b):\n    if b == 9:\n        {how}\n    return a + b")
    later = py("assert add(3, 3) == 6")
    book = ["assert add(4, 4) == 8"]
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step([ProblemRollout(ADD, [code], [[SUITE, later]], book)])
    assert [t.passed for s in r.suites[0] for t in s.tests] == [True, False, False, False]
    assert r.mistakes_passed == [[True]] and r.code_valid == [True]
    # judge.isolate_calls: each call fails alone
    iso = Judge(executor, JudgeConfig(limits=LIMITS, isolate_calls=True))
    (r,) = iso.judge_step([ProblemRollout(ADD, [code], [[SUITE, later]], book)])
    assert [t.passed for s in r.suites[0] for t in s.tests] == [True, False, True, True]


def test_an_exit_in_a_mistake_book_test_fails_every_generated_test(judge):
    """39.1: the Mistake Book's tests run first. Fault tried: running the book last (the
    suite's tests passed)."""
    code = py("import sys\ndef add(a, b):\n    if a == 7:\n        sys.exit()\n    return a + b")
    (r,) = judge.judge_step([ProblemRollout(ADD, [code], [[SUITE]], ["assert add(7, 1) == 8", "assert add(1, 1) == 2"])])
    assert r.mistakes_passed == [[False, False]]
    assert [t.passed for t in r.suites[0][0].tests] == [False, False, False] and r.code_rewards == [0.0]


def test_every_test_runs_in_order_so_state_is_seen(judge):
    """39.2: a counter sees every call, across suites and after the book; the same CALL is a
    duplicate only with the same value. Fault tried: running each distinct CALL once (the
    second and third `next_id()` were duplicates and this test failed)."""
    right = py("count = 0\ndef next_id():\n    global count\n    count += 1\n    return count")
    stuck = py("def next_id():\n    return 1")
    s1 = py("assert next_id() == 1\nassert next_id() == 2\nassert next_id() == 2")
    s2 = py("assert next_id() == 4")
    (r,) = judge.judge_step([ProblemRollout(IDS, [right, stuck], [[s1, s2]] * 2)])
    a, b = r.suites[0]
    assert (a.valid, a.invalid, b.valid, b.invalid) == (3, 1, 1, 0)
    assert a.tests[2].kind == WRONG_EXPECTATION and a.tests[2].normalized == "assert next_id() == 3"
    assert r.code_rewards[0] == 1.0 and r.code_rewards[1] == pytest.approx((1 / 3 + 0) / 2)
    same = py("assert next_id() == 1\nassert next_id() == 1")  # the reference: 1 then 2, no duplicate
    (r,) = judge.judge_step([ProblemRollout(IDS, [stuck], [[same]])])
    assert [t.kind for t in r.suites[0][0].tests] == [None, WRONG_EXPECTATION]
    plain = py("assert add(1, 2) == 3\nassert add(1, 2) == 4")  # a pure function: the same value, a duplicate
    (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD], [[plain]])])
    assert [t.kind for t in r.suites[0][0].tests] == [None, DUPLICATE]


def test_the_book_runs_before_the_suites_and_consumes_state(judge):
    """39.2: a Mistake Book test is a call too. Fault tried: evaluating book tests on the
    reference (its counter moved on and the suites' expectations were all wrong)."""
    right = py("count = 0\ndef next_id():\n    global count\n    count += 1\n    return count")
    (r,) = judge.judge_step([ProblemRollout(IDS, [right], [[py("assert next_id() == 1")]], ["assert next_id() == 1"])])
    assert r.mistakes_passed == [[True]]
    # the reference checks the suite (its own first call: 1); the candidate's second call returns 2
    assert r.suites[0][0].tests[0].valid and r.suites[0][0].tests[0].passed is False


def test_a_reference_module_that_raises_checks_no_test(judge):
    """39.8: the reference swallows its module's error: the code is valid, no test is
    checked (neither valid nor invalid), the book still runs. Fault tried: the older
    execution (the problem was unusable)."""
    stdin = Problem(id="t/stdin", question="", entry_point="add",
                    reference=ADD.reference + "if __name__ == '__main__':\n    print(add(*map(int, input().split())))\n")
    suite = py("assert add(1, 2) == 3\nassert add(1\nassert add(2, 2) == 4")
    (r,) = judge.judge_step([ProblemRollout(stdin, [GOOD], [[suite]], ["assert add(5, 5) == 10"])])
    assert r.usable and r.code_valid == [True] and r.mistakes_passed == [[True]]
    s = r.suites[0][0]
    assert (s.valid, s.invalid) == (0, 0) and r.code_rewards == [1.0] and r.test_rewards == [[0.0]]
    assert all(t.kind is None and "not checked" in t.reason for t in s.tests)


def test_data_check_says_such_a_row_cannot_check_its_tests():
    """39.8: `codea1 data check` names the consequence. Fault tried: without the added
    reason (only "the reference failed")."""
    row = Problem(id="t/stdin", question="", entry_point="add", tests=["assert add(1, 2) == 3"],
                  reference=ADD.reference + "n = int(input())\n")
    (check,) = check_problems([row], limits=Limits(timeout_s=10.0, call_timeout_s=1.0), workers=1)
    assert check.status == "broken" and any(CANNOT_CHECK_TESTS in reason for reason in check.reasons)


def test_expected_values_that_need_parentheses_are_invalid_as_in_the_reference():
    """39.6: the reference writes `assert CALL == EXPECTED` from its parts and parses it
    again. Fault tried: reading the parts without the re-parse (all four were tests)."""
    text = py("assert f(1) == (not x)\nassert f(1) == (a and b)\nassert f(1) == (1 if c else 2)\n"
              "assert f(1) == (a == b)\nassert f(1) == [not x]")
    tests = read_reference_tests(text, "f")
    assert [t.call is None for t in tests] == [True, True, True, False, False]
    assert tests[3].expected == "a"  # `f(1) == a == b`: a chained comparison, its first right-hand side


def test_recursion_headroom_is_the_plain_programs(executor, tmp_path):
    """39.7: a candidate has the recursion headroom of a plain `python program.py`. Fault
    tried: the harness's frames counted against it (`RECURSION_CALIBRATION = -9`: depth 990
    failed here and passed in the plain program)."""
    rec = "def rec(n):\n    return 0 if n == 0 else 1 + rec(n - 1)\n"
    plain = []
    for n in (990, 997, 998, 999):
        path = tmp_path / "p.py"
        path.write_text(rec + f"rec({n})\n")
        plain.append(subprocess.run([sys.executable, str(path)], capture_output=True).returncode == 0)
    run = executor.run(Job(program=rec, calls=["rec(990)", "rec(997)", "rec(998)", "rec(999)"]))
    assert [c.status == "ok" for c in run.calls] == plain
    assert plain[0] and not plain[-1]


def test_values_the_reference_compares_cross(judge):
    """39.4: a 100,000-element value, nesting 300 deep, enum members. Fault tried: the old
    limits (1 MiB, depth 100, no enum): each test was invalid."""
    sort = Problem(id="t/sort", question="", entry_point="sort_list", reference="def sort_list(x):\n    return sorted(x)\n")
    big = py("assert sort_list(list(range(100000, 0, -1))) == list(range(1, 100001))")
    (r,) = judge.judge_step([ProblemRollout(sort, [py(sort.reference), py("def sort_list(x):\n    return x")], [[big]] * 2)])
    assert [row[0].valid for row in r.suites] == [1, 1] and r.code_rewards == [1.0, 0.0]
    nest = Problem(id="t/nest", question="", entry_point="nest",
                   reference="def nest(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n")
    (r,) = judge.judge_step([ProblemRollout(nest, [py(nest.reference)], [[py("assert nest(300) == nest(300)")]])])
    assert r.suites[0][0].valid == 1 and r.code_rewards == [1.0]
    enum = Problem(id="t/enum", question="", entry_point="pick",
                   reference="from enum import Enum\nclass C(Enum):\n    A = 1\n    B = 2\ndef pick(n):\n    return C.A if n else C.B\n")
    own = py("from enum import Enum\nclass C(Enum):\n    A = 1\n    B = 2\ndef pick(n):\n    return C.A if n else C.B")
    uses = py("def pick(n):\n    return C.A if n else C.B")
    (r,) = judge.judge_step([ProblemRollout(enum, [uses, own], [[py("assert pick(1) == C.A")]] * 2)])
    # (members compare by identity: the candidate's own class C is not the reference's)
    assert r.suites[0][0].valid == 1 and r.code_rewards == [1.0, 0.0]


def test_a_dict_view_compares_as_python_compares_it(judge):
    """A reference returning `d.keys()` or `d.items()`: Python's `==` holds them equal to the
    set of keys (of pairs), not to a list, and a values view equal to nothing. Fault found by
    an audit: both views crossed as unsupported, so every test of such a function was
    "reference raised" (invalid) and every candidate scored 0."""
    keys = Problem(id="t/keys", question="", entry_point="keys", reference="def keys(d):\n    return d.keys()\n")
    suite = py("assert keys({1: 2, 3: 4}) == {1, 3}\nassert keys({}) == set()\nassert keys({5: 0}) == [5]")
    codes = [py(keys.reference), py("def keys(d):\n    return set(d)"), py("def keys(d):\n    return set()")]
    (r,) = judge.judge_step([ProblemRollout(keys, codes, [[suite]] * 3)])
    # `== [5]` fails on the reference: a wrong expectation (counted valid and invalid, corrected to the
    # reference's value, a set, which `set(d)` also returns)
    assert [(s[0].valid, s[0].invalid) for s in r.suites] == [(3, 1)] * 3
    assert r.code_rewards == pytest.approx([1.0, 1.0, 1 / 3])
    items = Problem(id="t/items", question="", entry_point="pairs", reference="def pairs(d):\n    return d.items()\n")
    suite = py("assert pairs({1: 'a'}) == {(1, 'a')}\nassert pairs({}) == set()")
    codes = [py(items.reference), py("def pairs(d):\n    return set(d.items())"), py("def pairs(d):\n    return [(1, 'a')]")]
    (r,) = judge.judge_step([ProblemRollout(items, codes, [[suite]] * 3)])
    assert [s[0].valid for s in r.suites] == [2] * 3 and r.code_rewards == [1.0, 1.0, 0.0]
    values = Problem(id="t/values", question="", entry_point="vals", reference="def vals(d):\n    return d.values()\n")
    (r,) = judge.judge_step([ProblemRollout(values, [py(values.reference)], [[py("assert vals({1: 2}) == [2]")]])])
    assert r.suites[0][0].valid == 0   # a values view equals nothing: the reference fails the test


def test_a_value_known_by_its_digest_gets_one_verdict_in_both_executions(executor):
    """A reference value past `max_value_bytes` (here a 1 MiB string past a 64 KiB bound)
    crosses as a digest: its test is used and corrected (the expectation -1 is wrong), a
    candidate returning the same string passes it, and the corrected test, too large to
    write, never enters the Mistake Book. Fault found by a differential run of the two
    executions: the older one (`isolate_calls`) dropped the test as "reference raised", so
    every candidate scored 1.0 there and 2/3 here."""
    limits = Limits(timeout_s=10.0, call_timeout_s=3.0, max_value_bytes=1 << 16)
    big = "def f(n):\n    if n < 0:\n        return 'a' * (1 << 20)\n    return n\n"
    problem = Problem(id="t/big", question="", entry_point="f", reference=big)
    codes = [py("def f(n):\n    return n"), py(big)]
    suite = py("assert f(1) == 1\nassert f(-1) == -1\nassert f(3) == 3")
    seen = []
    for isolate in (False, True):
        judge = Judge(executor, JudgeConfig(limits=limits, reference_limits=limits, isolate_calls=isolate))
        (r,) = judge.judge_step([ProblemRollout(problem, codes, [[suite]] * 2)])
        t = r.suites[0][0].tests[1]
        assert (t.kind, t.used, t.normalized) == (WRONG_EXPECTATION, True, None), isolate
        assert [r.suites[k][0].tests[1].passed for k in (0, 1)] == [False, True]
        assert dict(r.mistake_update().failed) == {}
        seen.append((r.code_valid, r.code_rewards, r.test_rewards))
    assert seen[0] == seen[1] and seen[0][1] == [2 / 3, 1.0]


def _printer(size: int) -> str:
    return py("def add(a, b):\n    for i in range(%d):\n        print('line', i, 'of the running sum')\n    return a + b"
              % (size // 25))


def test_the_same_job_gets_one_verdict_under_a_loaded_executor(executor):
    """39.3: a verdict is a function of its inputs: candidates printing 40 KB to 400 KB
    (around the old 64 KiB stop), each judged eight times while other runs and a busy
    thread load the machine, get one verdict, the reference's (every test passes). Fault
    tried: `stop_on_output` left on (the older rule): the verdicts were 0.0 past 64 KiB."""
    judge = Judge(executor, JudgeConfig(limits=LIMITS))
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            executor.run(Job(program="x = sum(i * i for i in range(300_000))\nprint('z' * 200_000)"))

    def spin() -> None:
        while not stop.is_set():
            sum(i for i in range(10_000))

    loaders = [threading.Thread(target=load, daemon=True), threading.Thread(target=spin, daemon=True)]
    for t in loaders:
        t.start()
    try:
        verdicts = {}
        for size in (40_000, 70_000, 100_000, 130_000, 400_000):
            rollout = ProblemRollout(ADD, [_printer(size)], [[SUITE, py("assert add(3, 3) == 6")]])
            verdicts[size] = {tuple(judge.judge(rollout).code_rewards) for _ in range(8)}
    finally:
        stop.set()
        for t in loaders:
            t.join()
    assert verdicts == {size: {(1.0,)} for size in verdicts}


def test_an_unbounded_printer_cannot_grow_the_judges_memory(executor):
    """39.3: output past the cap is read and dropped: a program printing for its whole
    budget leaves the worker's peak memory where it was and the run's text at the cap.
    Fault tried: `_Output` keeping every byte: this test failed."""
    out = _Output(65536, stop=False)
    chunk = b"x" * (1 << 20)
    for _ in range(1024):  # 1 GiB through the capture
        assert out.add(False, chunk)
    assert len(out.out) + len(out.err) == 65536 and out.total == 1 << 30
    pids = [w.proc.pid for w in executor._started]
    before = {pid: _peak_kb(pid) for pid in pids}
    limits = Limits(timeout_s=3.0, call_timeout_s=3.0, stop_on_output=False)
    run = executor.run(Job(program="import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n", limits=limits))
    assert run.status == "timeout" and len(run.stdout) <= limits.max_output_bytes
    grown = max(_peak_kb(pid) - before[pid] for pid in pids)
    assert grown < 20_000, f"a worker's peak memory grew by {grown} kB"


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_golden_training_reward_adds_the_problems_imports_like_evaluation(executor):
    """39.9: one rule for golden mode's training reward, validation and `eval code`: the
    extracted code after the problem's imports. Fault tried: the old `(p, c)` pairs (the
    code that relies on the imports failed in training)."""
    problem = Problem(id="t/typing", question="", entry_point="first", imports="from typing import List",
                      reference="from typing import List\ndef first(xs: List[int]) -> int:\n    return xs[0]\n",
                      tests=["assert first([3, 4]) == 3"])
    code = "def first(xs: List[int]) -> int:\n    return xs[0]\n"
    items = golden_items([problem], [[code]])
    assert items == [(problem, problem.program(code))]
    (result,) = golden_results(executor, items, LIMITS)
    assert result.pass_rate == 1.0 and result.correct
    assert Judge(executor, JudgeConfig(limits=LIMITS)).evaluate_golden(problem, code).passed


def test_unreadable_tests_still_count_when_the_program_ends_early(judge):
    """A suite whose checks the program never finished keeps only its unreadable tests as
    invalid (the reference never printed its count). Fault tried: counting the rest as
    reference-raised (the counts were (0, 3))."""
    exits = Problem(id="t/exit", question="", entry_point="add",
                    reference="import sys\ndef add(a, b):\n    if a < 0:\n        sys.exit(1)\n    return a + b\n")
    suite = py("assert add(1, 2) == 3\nassert add(1, 1) == (not 0)\nassert add(-1, 2) == 1\nassert add(2, 2) == 4")
    (r,) = judge.judge_step([ProblemRollout(exits, [GOOD], [[suite]])])
    s = r.suites[0][0]
    assert r.code_valid == [False] and (s.valid, s.invalid) == (1, 1)
    assert [t.kind for t in s.tests] == [None, UNPARSABLE, None, None]
    assert REFERENCE_RAISED not in s.invalid_kinds


def test_reference_defects_of_issue_39_are_not_copied(judge):
    """The reference defects issue 39 allows us not to copy (docs/ARCHITECTURE.md, fidelity
    table), each on its example. Fault tried: a pass found by substring (`_1` in `_10`)
    would make the second check below 11/11; it failed with 10/11."""
    bad = py("def add(a, b):\n    return a - b if b > 5 else a + b")
    eleven = py("assert add(0, 1) == 1\nassert add(1, 9) == 10\n"
                + "\n".join(f"assert add({k}, 1) == {k + 1}" for k in range(2, 11)))
    (r,) = judge.judge_step([ProblemRollout(ADD, [bad], [[eleven]])])
    assert [t.passed for t in r.suites[0][0].tests].count(True) == 10  # the second test fails, honestly
    # an empty test completion: no test, no crash (the reference divides by its length)
    (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD], [[""]])])
    assert r.usable and (r.suites[0][0].valid, r.suites[0][0].invalid) == (0, 0)
    # a Mistake Book text that does not parse is skipped; the rest of the program runs
    (r,) = judge.judge_step([ProblemRollout(ADD, [GOOD], [[SUITE]], ["assert add(1, 1) == <object at 0x1>"])])
    assert r.mistakes_skipped and r.code_rewards == [1.0]
    # a candidate that redefines print: the verdicts do not read its output
    (r,) = judge.judge_step([ProblemRollout(ADD, [py("print = None\ndef add(a, b):\n    return a + b")], [[SUITE]])])
    assert r.code_rewards == [1.0]
    # `pytest.approx` (undefined in the program): that test is a wrong expectation, the later ones keep their values
    third = Problem(id="t/third", question="", entry_point="third", reference="def third(x):\n    return x / 3\n")
    approx = py("assert third(1) == pytest.approx(0.3333)\nassert third(3) == 1.0\nassert third(6) == 2.0")
    (r,) = judge.judge_step([ProblemRollout(third, [py(third.reference)], [[approx]])])
    assert [t.kind for t in r.suites[0][0].tests] == [WRONG_EXPECTATION, None, None] and r.code_rewards == [1.0]
    # a reference global named like the reference harness's bookkeeping (`seen`) changes nothing
    seen = Problem(id="t/seen", question="", entry_point="add", reference="seen = 0\ndef add(a, b):\n    return a + b + seen\n")
    (r,) = judge.judge_step([ProblemRollout(seen, [GOOD], [[SUITE]])])
    assert r.suites[0][0].valid == 3 and r.code_rewards == [1.0]
    # a returned generator cannot be compared: its test is invalid
    gen = Problem(id="t/gen", question="", entry_point="evens", reference="def evens(n):\n    return (x for x in range(0, n, 2))\n")
    (r,) = judge.judge_step([ProblemRollout(gen, [py(gen.reference)], [[py("assert evens(4) == [0, 2]")]])])
    assert r.suites[0][0].tests[0].kind == REFERENCE_RAISED
    # a numpy array compares by its items (the reference: an ambiguous truth value, an invalid test)
    arr = Problem(id="t/arr", question="", entry_point="twice",
                  reference="import numpy as np\ndef twice(x):\n    return np.array(x) * 2\n")
    (r,) = judge.judge_step([ProblemRollout(arr, [py(arr.reference)], [[py("assert twice([1, 2]) == np.array([2, 4])")]])])
    assert r.suites[0][0].valid == 1 and r.code_rewards == [1.0]
    # two lists holding the same NaN object: values are rebuilt here, and NaN != NaN
    nan = Problem(id="t/nan", question="", entry_point="nans", reference="import math\ndef nans():\n    return [math.nan]\n")
    (r,) = judge.judge_step([ProblemRollout(nan, [py(nan.reference)], [[py("assert nans() == [math.nan]")]])])
    assert r.suites[0][0].tests[0].kind == WRONG_EXPECTATION and r.code_rewards == [0.0]


def test_a_returned_object_is_the_value_it_had_when_returned(judge):
    """A reference that returns its own list and grows it on the next call: the reference
    keeps the object and compares the candidate with it after all its calls, so a candidate
    identical to the reference fails every test but the last (code reward 1/3, two tests
    into the Mistake Book). Each value is the one the call returned, when it returned: the
    reference's own code passes every test. (docs/ARCHITECTURE.md, fidelity table.)"""
    push = Problem(id="t/push", question="", entry_point="push",
                   reference="_s = []\ndef push(x):\n    _s.append(x)\n    return _s\n")
    suite = py("assert push(1) == [1]\nassert push(2) == [1, 2]\nassert push(3) == [1, 2, 3]")
    (r,) = judge.judge_step([ProblemRollout(push, [py(push.reference), py("def push(x):\n    return [x]")],
                                            [[suite]] * 2)])
    assert [s[0].valid for s in r.suites] == [3, 3]
    assert r.code_rewards == pytest.approx([1.0, 1 / 3])
    # the book holds the tests the wrong candidate failed, as the reference's values read them
    assert sorted(dict(r.mistake_update().failed)) == ["assert push(2) == [1, 2]", "assert push(3) == [1, 2, 3]"]


def test_a_program_sees_the_names_a_script_has(judge):
    """`python program.py` gives a script `__file__` (the reference runs a program file); a
    candidate that builds a path from it was invalid ("NameError: name '__file__' is not
    defined") and scored 0."""
    code = py("import os\nHERE = os.path.dirname(os.path.abspath(__file__))\nassert __cached__ is None\n"
              "def add(a, b):\n    return a + b")
    (r,) = judge.judge_step([ProblemRollout(ADD, [code], [[SUITE]])])
    assert r.code_valid == [True] and r.code_rewards == [1.0]


def test_an_instance_compares_by_its_attributes_not_its_eq(judge):
    """An instance of a class the program defines crosses as its type name and attributes
    (the judge never runs the class's `__eq__`, which a candidate may define too): a `Bag`
    whose `__eq__` ignores order equals another only with its items in the same order. The
    reference, running plain Python, calls `__eq__`. (docs/ARCHITECTURE.md, fidelity table.)"""
    bag = ("class Bag:\n    def __init__(self, items):\n        self.items = list(items)\n"
           "    def __eq__(self, other):\n        return sorted(self.items) == sorted(other.items)\n")
    problem = Problem(id="t/bag", question="", entry_point="pack", reference=bag + "def pack(x):\n    return Bag(x)\n")
    reversed_bag = py(bag + "def pack(x):\n    return Bag(reversed(x))")
    suite = py("assert pack([1, 2]) == Bag([1, 2])\nassert pack([3]) == Bag([3])")
    (r,) = judge.judge_step([ProblemRollout(problem, [py(problem.reference), reversed_bag], [[suite]] * 2)])
    assert [s[0].valid for s in r.suites] == [2, 2]
    assert r.code_rewards == [1.0, 0.5]   # Python's `==` (the reference) passes both of the second's


NODE = Problem(id="t/node", question="", entry_point="make", reference=(
    "class Node:\n    def __init__(self, val):\n        self.val = val\n        self.children = []\n"
    "def make(v):\n    n = Node(v)\n    if v > 1:\n        n.children.append(Node(v - 1))\n    return n\n"))


def test_a_stored_object_is_built_as_the_references_when_replayed(executor, tmp_path):
    """A failed test whose value is an instance of the program's class enters the Mistake
    Book as a text that builds that instance (its `__init__` takes other arguments), in
    both executions; replayed, the right candidate passes it and the wrong one fails it.
    Fault found by an audit: the book stored `Node(val=2, children=[...])`, whose replay
    raised TypeError for every candidate (the right one's code reward 0.5, and the test
    stayed at the top of the book)."""
    from codea1.mistakes import MistakeBook

    right = py("def make(v):\n    n = Node(v)\n    if v > 1:\n        n.children.append(Node(v - 1))\n    return n")
    wrong = py("def make(v):\n    return Node(v)")
    stored = []
    for isolate in (False, True):
        judge = Judge(executor, JudgeConfig(limits=LIMITS, isolate_calls=isolate))
        (r,) = judge.judge_step([ProblemRollout(NODE, [right, wrong], [[py("assert make(2) == None")]] * 2)])
        assert r.code_rewards == [1.0, 0.0], isolate
        assert "Node(val=2, children=[Node(val=1, children=[])])" in r.suites[1][0].tests[0].reason
        stored.append(dict(r.mistake_update().failed))
    assert stored[0] == stored[1] and len(stored[0]) == 1
    with MistakeBook(tmp_path / "book.sqlite") as book:
        book.apply_step(1, {NODE.id: r.mistake_update()})
        replay = book.top(NODE.id)
    for isolate in (False, True):
        judge = Judge(executor, JudgeConfig(limits=LIMITS, isolate_calls=isolate))
        (r,) = judge.judge_step([ProblemRollout(NODE, [right, wrong], [[py("assert make(1) == None")]] * 2, replay)])
        assert r.mistakes_passed == [[True], [False]] and r.code_rewards == [1.0, 0.5], isolate  # (it passes make(1))


def test_a_candidate_cannot_rebind_what_a_book_tests_expected_value_uses(executor):
    """The EXPECTED of a Mistake Book test that is not a literal is evaluated before the
    candidate's code runs (where the suites' EXPECTED are), so a candidate that rebinds
    `collections.Counter` cannot make its wrong answer equal to it. Fault found by an
    audit: evaluated after the candidate's module, the cheat passed both book tests
    (code rewards [1.0, 0.5, 0.0])."""
    count = Problem(id="t/count", question="", entry_point="count",
                    reference="from collections import Counter\ndef count(s):\n    return Counter(s)\n")
    book = ["assert count('aab') == __import__('collections').Counter({'a': 2, 'b': 1})",
            "assert count('') == __import__('collections').Counter()"]
    right = py("from collections import Counter\ndef count(s):\n    return Counter(s)")
    cheat = py("import collections\ncollections.Counter = lambda *a, **k: 0\ndef count(s):\n    return 0")
    wrong = py("def count(s):\n    return 0")
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step(
        [ProblemRollout(count, [right, cheat, wrong], [[py("assert count('x') == 0")]] * 3, book)])
    assert r.mistakes_passed == [[True, True], [False, False], [False, False]]
    assert r.code_rewards == [1.0, 0.0, 0.0]
    # the reference's value, as for a generated test: a candidate's own enum class is not the reference's
    enum = Problem(id="t/enum", question="", entry_point="pick",
                   reference="from enum import Enum\nclass C(Enum):\n    A = 1\ndef pick():\n    return C.A\n")
    uses = py("def pick():\n    return C.A")
    own = py("from enum import Enum\nclass C(Enum):\n    A = 1\ndef pick():\n    return C.A")
    (r,) = Judge(executor, JudgeConfig(limits=LIMITS)).judge_step(
        [ProblemRollout(enum, [uses, own], [[py("assert pick() == C.A")]] * 2, ["assert pick() == C.A"])])
    assert r.mistakes_passed == [[True], [False]] and r.code_rewards == [1.0, 0.0]


def test_a_value_of_more_than_a_million_nodes_crosses_whole(judge):
    """A value within `max_value_bytes` crosses whole however many nodes it has (here
    1,200,001, 13.7 MiB encoded): its test is used and the wrong candidate fails it. Fault
    found by an audit: the 1,000,000-node cap made it `ValueTooLarge`, an invalid test."""
    zeros = Problem(id="t/zeros", question="", entry_point="zeros", reference="def zeros(n):\n    return [0] * n\n")
    codes = [py(zeros.reference.strip()), py("def zeros(n):\n    return [0] * (n - 1) + [1]")]
    (r,) = judge.judge_step([ProblemRollout(zeros, codes, [[py("assert zeros(1200000) == []")]] * 2)])
    tests = [r.suites[k][0].tests[0] for k in (0, 1)]
    assert [(t.kind, t.used, t.passed) for t in tests] == [(WRONG_EXPECTATION, True, True), (WRONG_EXPECTATION, True, False)]
