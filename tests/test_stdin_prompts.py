"""The prompts of stdin problems: a complete program for the code model, input/output
pairs for the test model, in the format the judge reads."""

from __future__ import annotations

import re

import pytest

from codea1.data import Problem
from codea1.data.stdin_io import parse_io_tests
from codea1.rollout import code_messages, test_messages

PROBLEM = Problem(id="S/x", question="Read n. Print 2n.", entry_point="", reference="print(2 * int(input()))\n",
                  kind="stdin")
CODE = "print(int(input()) + 2)"


def test_the_code_model_is_asked_for_a_program_reading_stdin():
    text = code_messages(PROBLEM)[1]["content"]
    assert "reads the input from standard input" in text and PROBLEM.question in text
    assert "function" not in text
    # a row's own prompt still wins (the paper rows' rule)
    own = Problem(**{**PROBLEM.__dict__, "meta": {"prompt": [{"role": "user", "content": "mine"}]}})
    assert code_messages(own) == [{"role": "user", "content": "mine"}]


def test_the_test_prompt_asks_for_the_format_the_judge_reads():
    """White-box shows the program as buggy code, black-box does not; the format shown in
    the prompt, filled in, is read back as one test. Tried: asking for a ```test-input
    fence the reader does not take: the round trip failed."""
    white = test_messages(PROBLEM, CODE, n_tests=5)[1]["content"]
    black = test_messages(PROBLEM, white_box=False, n_tests=5)[1]["content"]
    assert CODE in white and "Buggy code" in white and CODE not in black and "Buggy" not in black
    for text in (white, black):
        assert "5 test cases" in text and "assert" not in text
        heads = ["# Role", "# Task", "# Strategy", "# Context", "# Output format"]
        assert [text.index(h) for h in heads] == sorted(text.index(h) for h in heads)
        shown = text.split("# Output format")[1]
        filled = re.sub(r"<the whole standard input>", "4", re.sub(r"<the exact expected output>", "8", shown))
        [test] = parse_io_tests(filled)
        assert (test.input, test.output) == ("4\n", "8\n")
    with pytest.raises(ValueError, match="code"):
        test_messages(PROBLEM, None)
