"""The stdin audit's fixes: inputs run as written (blank lines kept), one invalid test for
a completion cut off in its last output block, an indented fence's indentation stripped,
and `eval select` judging with the problem's checker."""

from __future__ import annotations

import json

import pytest

from codea1.data import Problem, bundled_problems
from codea1.data.stdin_io import io_test, parse_io_tests
from codea1.eval.stdin_tests import run_stdin_generated_tests, stdin_generated_tests
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.judge.judge import DUPLICATE, UNPARSABLE
from codea1.sandbox import Executor, Limits

PROBLEMS = {p.id: p for p in bundled_problems("stdin:all")}


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=2) as executor:
        yield executor


SUM = Problem(id="S/sum", question="Read n, then n integers on the second line (empty when n is 0). Print their sum.",
              entry_point="", reference="n = int(input())\nprint(sum(map(int, input().split())))\n", kind="stdin",
              meta={"time_limit_s": 1.0})
SUM_RIGHT = "```python\nn = int(input())\na = list(map(int, input().split()))\nprint(sum(a))\n```"
SUM_FIRST = "```python\nn = int(input())\na = list(map(int, input().split()))\nprint(a[0] if a else 1)\n```"


def test_an_input_runs_as_the_test_model_wrote_it():
    """Blank lines and trailing spaces stay; only a final newline is added (to a JSON
    input); an empty block is an empty input, a block of one blank line is one newline.
    Fault: the input was normalized (`0\\n\\n` -> `0\\n`) before it ran."""
    [t] = parse_io_tests("```input\n0\n\n```\n```output\n0\n```")
    assert (t.input, t.key) == ("0\n\n", "0\n")
    [t] = parse_io_tests("```input\n1 2 \n```\n```output\n3\n```")
    assert t.input == "1 2 \n"
    assert [t.input for t in parse_io_tests("```input\n```\n```output\nx\n```\n```input\n\n```\n```output\ny\n```")] \
        == ["", "\n"]
    items = [{"input": "5", "output": "5"}, {"input": "0\n\n", "output": "0"}, {"input": "", "output": "1"}]
    assert [t.input for t in parse_io_tests("```json\n" + json.dumps(items) + "\n```")] == ["5\n", "0\n\n", ""]


def test_the_judge_runs_a_blank_line_and_books_it_as_run(ex):
    """SUM's test `0` + empty line: the right program passes it (code reward 1, no false
    attack); it is run, corrected and booked with its blank line; a Mistake Book test with
    a blank line is replayed as stored. Duplicates still go by the normalized input:
    `2\\n3 4 \\n\\n` repeats `2\\n3 4\\n`. Fault: the input ran as `0\\n` and the right
    program's input() hit EOF (code reward 0.5; the book replay failed too)."""
    suite = ("```input\n0\n\n```\n```output\n0\n```\n```input\n2\n3 4\n```\n```output\n7\n```\n"
             "```input\n2\n3 4 \n\n```\n```output\n7\n```")
    blank = io_test("0\n\n", "0\n")
    judge = Judge(ex, JudgeConfig(suite_size=8, alpha=0.5))
    [r] = judge.judge_step([ProblemRollout(SUM, [SUM_RIGHT, SUM_FIRST], [[suite], [suite]], mistakes=[blank])])
    assert r.usable and r.code_rewards[0] == pytest.approx(1.0)
    right, first = r.suites[0][0], r.suites[1][0]
    assert [t.kind for t in right.tests] == [None, None, DUPLICATE]
    assert [t.passed for t in right.tests[:2]] == [True, True] and r.mistakes_passed[0] == [True]
    assert right.tests[0].normalized == blank
    assert [t.passed for t in first.tests[:2]] == [False, False] and r.mistakes_passed[1] == [False]
    assert r.mistake_update().failed == {blank: 1, io_test("2\n3 4\n", "7\n"): 1}


def test_a_completion_cut_off_in_its_last_output_counts_one_invalid_test(ex):
    """The input and its unclosed output are one unparsable test, as an assert cut off is
    one; an unclosed input after an unpaired input is still two. Fault: two invalid tests
    (an input without its output, an unclosed output block)."""
    cut = "```input\n2\n1 4\n```\n```output\n3\n```\n```input\n3\n-5 -2 -9\n```\n```output\n7"
    got = [(t.source, t.reason) for t in parse_io_tests(cut) if t.input is None]
    assert got == [("```input\n3\n-5 -2 -9\n```\n```output\n7", "an unclosed output block")]
    got = [t.reason for t in parse_io_tests("```input\n1\n```\n```input\n2")]
    assert got == ["an input without its output", "an unclosed input block"]
    spread = PROBLEMS["stdin/002-max-minus-min"]
    [r] = Judge(ex, JudgeConfig(suite_size=8)).judge_step(
        [ProblemRollout(spread, [f"```python\n{spread.reference}```"], [[cut]])])
    s = r.suites[0][0]
    assert (s.valid, s.invalid, s.invalid_kinds) == (1, 1, {UNPARSABLE: 1})


def test_an_indented_fence_loses_its_own_indentation():
    """A fence in a numbered list: its lines lose as much leading whitespace as the fence
    line has, no more (Markdown's rule). Fault: the input kept `   ` on every line."""
    text = "1. all negative\n   ```input\n   3\n   -5 -2 -9\n   ```\n   ```output\n   7\n   ```"
    assert [(t.input, t.output) for t in parse_io_tests(text)] == [("3\n-5 -2 -9\n", "7\n")]
    text = "  ```input\n    5\n 6\n7\n  ```\n  ```output\n  x\n  ```"
    assert [t.input for t in parse_io_tests(text)] == ["  5\n6\n7\n"]
    assert [t.input for t in parse_io_tests("```input\n  5\n```\n```output\n10\n```")] == ["  5\n"]


def test_eval_select_judges_with_the_problem_s_checker(ex):
    """stdin/019 accepts any right pair: a candidate printing `3 4` passes a test that says
    `1 2`, as in training; a wrong pair still fails. Fault: tokens only, the right `3 4`
    failed."""
    pair = PROBLEMS["stdin/019-pair-with-sum"]
    last = ("n, t = map(int, input().split())\na = list(map(int, input().split()))\n"
            "for j in range(n - 1, -1, -1):\n    for i in range(j):\n        if a[i] + a[j] == t:\n"
            "            print(i + 1, j + 1); raise SystemExit\nprint(-1)\n")
    codes = [f"```python\n{pair.reference}```", f"```python\n{last}```", "```python\nprint(1, 3)\n```"]
    tests = stdin_generated_tests(["```input\n4 5\n1 4 2 3\n```\n```output\n1 2\n```"])
    results = run_stdin_generated_tests(ex, pair, codes, tests, Limits(timeout_s=10, call_timeout_s=2))
    assert [r.passes for r in results] == [[True], [True], [False]]
    assert results[1].behaviour == (("3", "4"),)


def test_generated_tests_still_merge_by_the_normalized_input():
    """`eval select`'s distinct tests: inputs equal but for blank lines and trailing
    spaces are one test (the first, run as written), as the judge's duplicates are."""
    tests = stdin_generated_tests(["```input\n0\n\n```\n```output\n0\n```", "```input\n0 \n```\n```output\n0\n```"])
    assert [(t.input, t.text) for t in tests] == [("0\n\n", io_test("0\n\n", "0\n"))]
