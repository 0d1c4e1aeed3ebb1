"""Loaders of contest data (CodeContests, TACO, APPS, LiveCodeBench) on rows in each data
set's real format, written by the team for these tests (no row comes from a data set),
and `codea1 data check` on what they load."""

from __future__ import annotations

import base64
import json
import pickle
import zlib

import pytest

from codea1.data import Problem, ProblemFormatError, load_problems, save_problems
from codea1.data.check import check_problems
from codea1.data.stdin_io import golden_io_tests
from codea1.sandbox import Executor

ADD_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def codecontests_row(**change):
    row = {
        "name": "9999_A. Sum of two",
        "description": "Given a and b, print a + b.\n\nInput\n\nOne line: a b.\n\nOutput\n\nTheir sum.",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["10 -3\n"], "output": ["7\n"]},
        "generated_tests": {"input": ["0 0\n", "5 5\n"], "output": ["0\n", "10\n"]},
        "source": 2, "difficulty": 7,
        "solutions": {"language": [2, 1, 3], "solution": ["#include <cstdio>\nint main(){}", "print 1",
                                                          ADD_PROGRAM]},
        "incorrect_solutions": {"language": [3], "solution": ["print(0)\n"]},
        "cf_contest_id": 9999, "cf_index": "A", "cf_points": 500.0, "cf_rating": 800, "cf_tags": ["math"],
        "is_description_translated": False, "untranslated_description": "",
        "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 268435456,
        "input_file": "", "output_file": "",
    }
    row.update(change)
    return row


def test_codecontests_jsonl_and_parquet(tmp_path):
    """The first Python 3 solution is the reference; public, private and generated tests
    are the golden ones; limits go to meta. Parquet (structs, numpy arrays) reads the same."""
    [p] = load_problems(_write_jsonl(tmp_path / "cc.jsonl", [codecontests_row()]))
    assert (p.kind, p.id, p.entry_point, p.reference) == ("stdin", "codecontests/9999_A. Sum of two", "", ADD_PROGRAM)
    assert [(t.input, t.output) for t in golden_io_tests(p)] == [
        ("1 2\n", "3\n"), ("10 -3\n", "7\n"), ("0 0\n", "0\n"), ("5 5\n", "10\n")]
    assert p.meta["time_limit_s"] == 2.5 and p.meta["memory_limit_mb"] == 256
    assert p.meta["test_counts"] == {"public": 1, "private": 1, "generated": 2}
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([codecontests_row(), codecontests_row(name="9999_B. Other")]),
                   tmp_path / "cc.parquet")
    problems = load_problems(tmp_path / "cc.parquet")
    assert [q.id for q in problems] == ["codecontests/9999_A. Sum of two", "codecontests/9999_B. Other"]
    assert problems[0].tests == p.tests and problems[0].reference == ADD_PROGRAM
    # without a Python 3 solution: evaluation only; it survives a save and a load
    [none] = load_problems(_write_jsonl(tmp_path / "c2.jsonl", [codecontests_row(
        name="no-python", solutions={"language": [2], "solution": ["int main(){}"]})]))
    assert none.reference == "" and none.meta["no_reference"]
    save_problems([none, p], tmp_path / "saved.jsonl")
    assert [q.to_dict() for q in load_problems(tmp_path / "saved.jsonl")] == [none.to_dict(), p.to_dict()]


@pytest.mark.parametrize("change, field", [
    ({"public_tests": {"input": ["1 2\n"]}}, "public_tests"),
    ({"private_tests": {"input": ["1\n", "2\n"], "output": ["1\n"]}}, "private_tests"),
    ({"solutions": {"language": [3, 3], "solution": [ADD_PROGRAM]}}, "solutions"),
    ({"solutions": {"language": [3], "solution": [5]}}, "solutions.solution[0]"),   # before: no reference, silently
    ({"solutions": {"language": 3, "solution": [ADD_PROGRAM]}}, "solutions.language"),   # before: a TypeError
    ({"time_limit": 2}, "time_limit"),
    ({"generated_tests": {"input": [3], "output": ["3\n"]}}, "generated_tests.inputs[0]"),
])
def test_codecontests_malformed_rows_name_file_row_and_field(tmp_path, change, field):
    path = _write_jsonl(tmp_path / "bad.jsonl", [codecontests_row(), codecontests_row(name="second", **change)])
    with pytest.raises(ProblemFormatError) as err:
        load_problems(path)
    assert "bad.jsonl" in str(err.value) and "row 2" in str(err.value) and field in str(err.value)


def test_taco_time_limits_in_their_units():
    """TACO's `time_limit` is text; "500 ms" is half a second (before: 500 seconds)."""
    from codea1.data.formats.taco import _time_limit

    assert [_time_limit(t) for t in ("2 seconds", "1.5 sec", "500 ms", "250 milliseconds", "3", "None", 4)] == [
        2.0, 1.5, 0.5, 0.25, 3.0, None, 4.0]


def taco_stdin_row():
    return {
        "question": "Read a and b and print their sum.",
        "solutions": json.dumps([ADD_PROGRAM, "print(sum(map(int, input().split())))\n"]),
        "starter_code": "",
        "input_output": json.dumps({"inputs": ["1 2\n", ["4 4"]], "outputs": ["3\n", ["8"]]}),
        "difficulty": "EASY", "raw_tags": "['Math']", "name": "sum-two", "source": "codeforces",
        "tags": "['Mathematics']", "skill_types": "[]", "url": "https://codeforces.example/sum-two",
        "Expected Auxiliary Space": None, "time_limit": "2.0 seconds", "date": "2021-01-01",
        "picture_num": "0", "memory_limit": "256.0 megabytes", "Expected Time Complexity": None,
    }


def apps_call_row():
    return {
        "problem_id": 4242,
        "question": "Return the number of vowels in s.",
        "solutions": json.dumps(["class Solution:\n    def countVowels(self, s):\n"
                                 "        return sum(c in 'aeiou' for c in s)\n"]),
        "input_output": json.dumps({"fn_name": "countVowels", "inputs": [["banana"], ["xyz"]],
                                    "outputs": [[3], [0]]}),
        "difficulty": "introductory", "url": "https://leetcode.example/count-vowels",
        "starter_code": "class Solution:\n    def countVowels(self, s: str) -> int:\n        ",
    }


def test_taco_and_apps_rows_stdin_and_call_based(tmp_path):
    """TACO's stdin half (outputs as strings or lists of lines) becomes stdin problems;
    APPS's call-based half (`fn_name`, a LeetCode class) goes to the function-level path."""
    [stdin] = load_problems(_write_jsonl(tmp_path / "taco.jsonl", [taco_stdin_row()]))
    assert stdin.kind == "stdin" and stdin.id == "taco/https://codeforces.example/sum-two"
    assert [(t.input, t.output) for t in golden_io_tests(stdin)] == [("1 2\n", "3\n"), ("4 4\n", "8\n")]
    assert stdin.meta["time_limit_s"] == 2.0 and stdin.reference == ADD_PROGRAM
    [call] = load_problems(_write_jsonl(tmp_path / "apps.jsonl", [apps_call_row()]))
    assert (call.kind, call.id, call.entry_point) == ("function", "apps/4242", "Solution")
    assert call.tests == ["assert (_codea1_got := Solution().countVowels('banana')) == 3 or _codea1_got == [3]",
                          "assert (_codea1_got := Solution().countVowels('xyz')) == 0 or _codea1_got == [0]"]
    assert "def countVowels(self, s: str) -> int:" in call.question
    bad = dict(apps_call_row(), input_output='{"fn_name": "f", "inputs": [[1]]')
    with pytest.raises(ProblemFormatError, match=r"apps2\.jsonl, row 1.*input_output.*JSON text"):
        load_problems(_write_jsonl(tmp_path / "apps2.jsonl", [bad]))
    bad = dict(taco_stdin_row(), input_output=json.dumps({"inputs": ["1\n"], "outputs": [5]}))
    with pytest.raises(ProblemFormatError, match=r"input_output\.outputs\[0\]"):
        load_problems(_write_jsonl(tmp_path / "taco2.jsonl", [bad]))


def _compressed(cases) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def lcb_row(**change):
    row = {
        "question_title": "Sum Two", "question_content": "Print A + B.\n\nInput: A B", "platform": "atcoder",
        "question_id": "abc999_a", "contest_id": "abc999", "contest_date": "2024-05-01T00:00:00",
        "starter_code": "", "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": _compressed([{"input": "7 7\n", "output": "14\n", "testtype": "stdin"}]),
        "metadata": "{}",
    }
    row.update(change)
    return row


def lcb_functional_row(qid, question, signature, public, private):
    """A LeetCode row: `class Solution` starter code with `signature`, (input, output) cases."""
    def cases(pairs):
        return [{"input": i, "output": o, "testtype": "functional"} for i, o in pairs]

    return lcb_row(question_id=qid, platform="leetcode", question_content=question,
                   starter_code=f"class Solution:\n    def {signature}:\n        ",
                   public_test_cases=json.dumps(cases(public)), private_test_cases=_compressed(cases(private)),
                   metadata=json.dumps({"func_name": signature.split("(")[0]}))


def test_livecodebench_stdin_functional_and_a_hostile_pickle(tmp_path):
    """Compressed private tests are read; functional rows become `Solution().f(...)`
    asserts; a pickle that names a function (it would run code) is refused. Tried: plain
    `pickle.loads`: the hostile row ran its payload (wrote the marker file) and this failed."""
    functional = lcb_functional_row("2999", "Return x times y.", "multiply(self, x: int, y: int) -> int",
                                    [("2\n3", "6")], [("[1, 2]\n0", "null")])
    stdin, call = load_problems(_write_jsonl(tmp_path / "lcb.jsonl", [lcb_row(), functional]))
    assert stdin.kind == "stdin" and stdin.reference == "" and stdin.meta["no_reference"]
    assert [(t.input, t.output) for t in golden_io_tests(stdin)] == [("1 2\n", "3\n"), ("7 7\n", "14\n")]
    assert call.entry_point == "Solution" and call.tests == ["assert Solution().multiply(2, 3) == 6",
                                                             "assert Solution().multiply([1, 2], 0) == None"]
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    hostile = base64.b64encode(zlib.compress(pickle.dumps(Payload()))).decode()
    with pytest.raises(ProblemFormatError, match=r"row 1, field 'private_test_cases'.*refused"):
        load_problems(_write_jsonl(tmp_path / "evil.jsonl", [lcb_row(private_test_cases=hostile)]))
    assert not marker.exists()
    with pytest.raises(ProblemFormatError, match=r"public_test_cases\[0\]"):
        load_problems(_write_jsonl(tmp_path / "bad.jsonl", [lcb_row(
            public_test_cases=json.dumps([{"input": "1", "output": "1", "testtype": "batch"}]))]))


def test_data_check_runs_the_loaded_references_on_their_tests(tmp_path):
    """A right reference passes, a wrong one is named with the test it fails, a missing
    one is said; the call-based APPS row is checked on the function-level path."""
    wrong = codecontests_row(name="wrong", solutions={"language": [3], "solution": ["print(0)\n"]})
    missing = codecontests_row(name="missing", solutions={"language": [2], "solution": ["x"]})
    problems = load_problems(_write_jsonl(tmp_path / "cc.jsonl", [codecontests_row(), wrong, missing]))
    problems += load_problems(_write_jsonl(tmp_path / "apps.jsonl", [apps_call_row()]))
    with Executor(workers=2) as ex:
        checks = check_problems(problems, ex)
    assert [c.status for c in checks] == ["ok", "broken", "broken", "ok"]
    assert "golden test 0 fails" in checks[1].reasons[0] and "no reference" in checks[2].reasons[0]


def test_bundled_stdin_problems_pass_their_tests_and_their_naive_programs_do_not():
    """The 25 team-written stdin problems: each reference passes its golden tests, each
    `meta.naive` program fails at least one (the edge case it misses); splits 20/5, a demo
    subset of training problems, one tolerance and one checker problem."""
    from codea1.data import bundled_problems, bundled_split

    problems = bundled_problems(bundled_split("bundled-stdin"))
    assert len(problems) == 25 and all(p.kind == "stdin" and len(p.tests) >= 3 for p in problems)
    assert len(bundled_problems("stdin:train")) == 20 and len(bundled_problems("stdin:heldout")) == 5
    assert all(p.meta["split"] == "train" for p in bundled_problems(bundled_split("bundled-stdin:demo")))
    assert sum("float_tolerance" in p.meta for p in problems) == 1 and sum("checker" in p.meta for p in problems) == 1
    naive = [Problem(**{**p.__dict__, "reference": p.meta["naive"]}) for p in problems]
    with Executor(workers=2) as ex:
        assert [c.status for c in check_problems(problems, ex)] == ["ok"] * 25
        assert [c.status for c in check_problems(naive, ex)] == ["broken"] * 25
    with pytest.raises(ValueError, match="bundled-stdin:train"):
        bundled_split("bundled-stdin:nope")


def test_call_based_apps_rows_get_the_imports_the_apps_harness_assumes(tmp_path):
    """APPS's and TACO's harnesses run a call-based program after their own import lines
    (`from typing import List, Tuple`, `collections`' `Counter`, ...), so LeetCode
    solutions (and starter code) use `List[int]` without importing it. Such a reference
    passes its tests, and so does a candidate written the same way. Before the fix: the
    reference failed `codea1 data check` with "NameError: name 'List' is not defined"."""
    from codea1.data.check import golden_call
    from codea1.sandbox import Job

    solution = ("class Solution:\n    def mostCommon(self, nums: List[int]) -> int:\n"
                "        return Counter(nums).most_common(1)[0][0]\n")
    row = dict(apps_call_row(), solutions=json.dumps([solution]),
               starter_code="class Solution:\n    def mostCommon(self, nums: List[int]) -> int:\n        ",
               input_output=json.dumps({"fn_name": "mostCommon", "inputs": [[[1, 2, 2]], [[7]]],
                                        "outputs": [[2], [7]]}))
    [problem] = load_problems(_write_jsonl(tmp_path / "apps.jsonl", [row]))
    with Executor(workers=1) as ex:
        [verdict] = check_problems([problem], ex)
        assert verdict.status == "ok", verdict.reasons
        run = ex.run(Job(program=problem.program(solution),
                         calls=[golden_call(t, i) for i, t in enumerate(problem.tests)]))
    assert run.program_ok and [c.status for c in run.calls] == ["ok", "ok"], (run.program_error, run.calls)


def test_livecodebench_programs_run_after_the_imports_its_harness_assumes(tmp_path):
    """LiveCodeBench's `testing_util` runs every program, functional or stdin, after its
    `import_string` (`from typing import *`, `from collections import *`, `from math import
    *`, ...), so a LeetCode answer that keeps the starter code's `List[int]` unimported
    passes there, and so must it here. Before the fix: "NameError: name 'List' is not
    defined" (functional) and "name 'gcd' is not defined" (stdin)."""
    from codea1.judge.golden import golden_item, golden_results

    functional = lcb_functional_row("3000", "Return the most common value.",
                                    "mostCommon(self, nums: List[int]) -> int", [("[1, 2, 2]", "2")], [("[7]", "7")])
    stdin = lcb_row(question_content="Print gcd(A, B).",
                    public_test_cases=json.dumps([{"input": "4 6\n", "output": "2\n", "testtype": "stdin"}]),
                    private_test_cases=_compressed([{"input": "9 3\n", "output": "3\n", "testtype": "stdin"}]))
    call, io = load_problems(_write_jsonl(tmp_path / "lcb.jsonl", [functional, stdin]))
    answers = ["class Solution:\n    def mostCommon(self, nums: List[int]) -> int:\n"
               "        return Counter(nums).most_common(1)[0][0]\n",
               "a, b = map(int, input().split())\nprint(gcd(a, b))\n"]
    with Executor(workers=1) as ex:
        results = golden_results(ex, [golden_item(call, answers[0]), golden_item(io, answers[1])])
    assert [r.passed for r in results] == [True, True], results


def test_call_based_answers_compare_as_their_harnesses_compare(tmp_path):
    """APPS, TACO and LiveCodeBench compare a returned tuple as a list (JSON has no
    tuples), and APPS and TACO accept an output wrapped in a list of one by its value or
    as the list. So a right answer that returns `(lo, hi)`, or `[7]` where the output is
    `[7]`, passes there and must pass here. Before: `assert f(...) == [1, 3]` failed the
    tuple, and the unwrapped `== 7` failed the list."""
    from codea1.judge.golden import golden_item, golden_results

    apps = dict(apps_call_row(), problem_id=7, starter_code="",
                solutions=json.dumps(["def span(xs):\n    return min(xs), max(xs)\n"]),
                input_output=json.dumps({"fn_name": "span", "inputs": [[[3, 1]], [[2]]],
                                         "outputs": [[[1, 3]], [[2, 2]]]}))
    single = dict(apps_call_row(), problem_id=8, starter_code="",
                  solutions=json.dumps(["def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n"]),
                  input_output=json.dumps({"fn_name": "evens", "inputs": [[[7, 8]], [[2, 4]]],
                                           "outputs": [[8], [[2, 4]]]}))
    lcb = lcb_functional_row("3001", "Return (x, y) swapped.", "swap(self, x: int, y: int) -> List[int]",
                             [("1\n2", "[2, 1]")], [("5\n6", "[6, 5]")])
    span, evens = load_problems(_write_jsonl(tmp_path / "apps.jsonl", [apps, single]))
    [swap] = load_problems(_write_jsonl(tmp_path / "lcb.jsonl", [lcb]))
    answers = [(span, "def span(xs):\n    return (min(xs), max(xs))\n"),
               (span, "def span(xs):\n    return [min(xs), max(xs)]\n"),
               (evens, "def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n"),   # [8] for the output [8]
               (evens, "def evens(xs):\n    return [x for x in xs if x % 2 == 0][0]\n"),  # 8: APPS's unwrapped value
               (swap, "class Solution:\n    def swap(self, x, y):\n        return y, x\n"),
               (span, "def span(xs):\n    return (max(xs), min(xs))\n"),                 # wrong
               (swap, "class Solution:\n    def swap(self, x, y):\n        return [[y, x]]\n"),  # LCB does not unwrap
               # globals a program may well use are not the comparison's names
               (span, "_r = _v = None\ndef span(xs):\n    assert _r is None and _v is None\n    return min(xs), max(xs)\n")]
    with Executor(workers=1) as ex:
        results = golden_results(ex, [golden_item(p, code) for p, code in answers])
    assert [r.passed for r in results] == [True, True, True, False, True, False, False, True], results
