"""The stdin test reader and the headings models write above their blocks: heading variants
label a plain fence (`Example 1 Input:`, `Test #1 input:`, `**Input**:`, `### Test 2`), a
labelled ```json block is that label's block, and a block's own lines are never read as
labels. Every test but the guards failed before (the heading was not a label, or the json
block was read as a list of tests)."""

from __future__ import annotations

import json

import pytest

from codea1.data import bundled_problems
from codea1.data.stdin_io import parse_io_tests
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.judge.judge import UNPARSABLE
from codea1.sandbox import Executor


def pairs(text: str) -> list:
    return [(t.input, t.output) if t.input is not None else t.reason for t in parse_io_tests(text)]


def fenced(before_input: str, before_output: str, fence: str = "```") -> str:
    return f"{before_input}\n{fence}\n3\n1 2 3\n```\n{before_output}\n{fence}\n6\n```"


@pytest.mark.parametrize("head_in,head_out", [
    ("Example 1 Input:", "Example 1 Output:"),
    ("Test #1 input:", "Test #1 output:"),
    ("**Input**:", "**Output**:"),
    ("**Test 1** Input:", "**Test 1** Expected Output:"),
    ("Input for test 1:", "Expected output for test 1:"),
    ("- Input:", "- Expected Output:"),
    ("1. Input:", "2. Output:"),
    ("Input #1:", "Output #1:"),
    ("Input (stdin):", "Output (stdout):"),
    ("Test 1 (input):", "Test 1 (output):"),
    ("Input Data:", "Output Data:"),
    ("#### Case 2 input", "#### Case 2 expected output"),
    ("Test 1 \u2014 Input:", "Test 1 \u2014 Output:"),
])
def test_heading_variants_label_the_plain_fence_below(head_in, head_out):
    """Fault: each of these headings was no label, so both blocks were skipped: no test."""
    assert pairs(fenced(head_in, head_out)) == [("3\n1 2 3\n", "6\n")]
    assert pairs(fenced(head_in, head_out, "```text")) == [("3\n1 2 3\n", "6\n")]


def test_the_formats_read_before_keep_their_meaning():
    """`Sample Input 1`, `Input 1:`, `Expected Output:`, `**Input:**`, `### Test 3 input`,
    `Here is the input:` were labels before and stay so; a fence's own label wins over the
    line above it."""
    for head_in, head_out in (("Sample Input 1", "Sample Output 1"), ("Input 1:", "Expected Output:"),
                              ("**Input:**", "**Output:**"), ("### Test 3 input", "### Test 3 output"),
                              ("Here is the input:", "Expected:"), ("Input", "Output")):
        assert pairs(fenced(head_in, head_out)) == [("3\n1 2 3\n", "6\n")], head_in
    assert pairs("Output:\n```input\n5\n```\nInput:\n```output\n10\n```") == [("5\n", "10\n")]


def test_a_heading_that_names_a_test_makes_the_block_below_its_input():
    """`### Test 2`, `Example 1:`, `Test Case 3:`, `**Test #4**` head the test's input; its
    output is the block labelled so, or the unlabelled block right after the input (blank
    lines between at most). Fault: the heading was no label, the blocks were skipped."""
    text = "\n".join(["### Test 2", "```", "5", "```", "Output:", "```", "10", "```",
                      "Example 1:", "```", "1 1", "```", "", "```", "2", "```",
                      "Test Case 3:", "```text", "0", "```", "```text", "0", "```",
                      "**Test #4**", "```", "7", "```", "Expected Output:", "```", "14", "```"])
    assert pairs(text) == [("5\n", "10\n"), ("1 1\n", "2\n"), ("0\n", "0\n"), ("7\n", "14\n")]
    # the prompt's input fence, then an unlabelled one: its output
    assert pairs("```input\n4\n```\n```\n8\n```") == [("4\n", "8\n")]


def test_a_labelled_json_block_is_that_label_s_block():
    """A ```json block under `Input:`/`Output:` is an input or an output written as JSON.
    Fault: it was read as a list of tests (`json test 0 is not an object`, then `an output
    without its input`...)."""
    text = "Input:\n```json\n[1, 2, 3]\n```\nOutput:\n```json\n6\n```"
    assert pairs(text) == [("[1, 2, 3]\n", "6\n")]
    text = "**Example 1 Input:**\n```json\n{\"a\": 1}\n```\n**Expected Output:**\n```json\n\"ok\"\n```"
    assert pairs(text) == [('{"a": 1}\n', '"ok"\n')]


def test_a_json_block_without_one_role_above_it_is_still_a_list_of_tests():
    items = [{"input": "1 2", "output": "3"}]
    for head in ("", "Tests:", "Test input and output:", "Here are the tests (stdin/stdout):", "### Test 1"):
        assert pairs(f"{head}\n```json\n{json.dumps(items)}\n```") == [("1 2\n", "3")], head
    assert pairs("```input\n1\n```\n```json\n" + json.dumps(items) + "\n```") == [
        "an input without its output", ("1 2\n", "3")]


def test_a_block_s_lines_are_data_never_labels():
    """An input may hold any text, `Input`/`Output:` lines included: the reader never reads a
    block's lines, and a label inside an unlabelled block labels nothing after it."""
    text = "```input\nInput\nOutput:\n### Test 2\n```\n```output\nInput:\n```"
    assert pairs(text) == [("Input\nOutput:\n### Test 2\n", "Input:\n")]
    assert pairs("```text\nExample 1 Input:\n```\n```\n5\n```\n```text\nOutput:\n```\n```\n10\n```") == []
    text = "Example 1 Input:\n```\nExpected Output:\n```\n```\nTest #2 input:\n```"
    assert pairs(text) == [("Expected Output:\n", "Test #2 input:\n")]


@pytest.mark.parametrize("line", [
    "Input: 5", "Test 1: 3 4", "- Input: `3`, `1 2 3`", "### Test Case 1: Input `4`", "Input Format:",
    "Inputs:", "Result:", "The array is:", "1.", "5", "Example:", "### Test cases",
    'Input: "hello"', "Input/Output:", "Input (see above): 3",
])
def test_prose_and_inline_data_label_nothing(line):
    """Data written on the line (`Input: 5`), quotes, code, other words, both roles, or a
    test heading without its number: the block below is skipped, as before."""
    assert pairs(f"{line}\n```\n7\n```") == []


def test_a_heading_s_input_without_output_is_one_unparsable_test():
    """A block a heading labels and nothing pairs counts invalid, as an ```input alone does;
    an unclosed block under a heading too."""
    assert pairs("Example 1 Input:\n```\n5\n```\nSome prose.\n```\n6\n```") == ["an input without its output"]
    assert pairs("### Test 2\n```\n5\n```\n**Output**:\n```\n1") == ["an unclosed output block"]
    assert pairs("Test #1 output:\n```\n6\n```") == ["an output without its input"]


def test_the_judge_takes_heading_tests_as_valid():
    """End to end: a suite written with heading variants is judged like the prompt's format:
    three valid tests and one unparsable (an input without its output). Fault: valid 0,
    invalid 2 (the json blocks as malformed lists of tests)."""
    problem = {p.id: p for p in bundled_problems("stdin:all")}["stdin/002-max-minus-min"]
    suite = "\n".join(["Example 1 Input:", "```", "3", "-5 -2 -9", "```", "Example 1 Output:", "```", "7", "```",
                       "### Test 2", "```", "2", "0 0", "```", "```", "0", "```",
                       "Input:", "```json", "1", "7", "```", "Output:", "```json", "0", "```",
                       "Test #4 input:", "```", "2", "1 5", "```"])
    with Executor(workers=1) as ex:
        [r] = Judge(ex, JudgeConfig(suite_size=8)).judge_step(
            [ProblemRollout(problem, [f"```python\n{problem.reference}```"], [[suite]])])
    s = r.suites[0][0]
    assert (s.valid, s.invalid, s.invalid_kinds) == (3, 1, {UNPARSABLE: 1})
    assert [t.kind for t in s.tests] == [None, None, None, UNPARSABLE]


# -- the reader's edges a mutation run found untested (benchmarks/mutation_score.py, stdin_io) --

def test_a_block_keeps_its_own_indentation_beyond_its_fence_s():
    """A grid's leading spaces are input: a body line loses only as much leading whitespace
    as its fence line has (a fence in a list item, indented 2 or 4), never more, and a line
    indented less than its fence loses only what it has. Faults: every leading space
    dropped (`#` for `  #`), or a fence's indent of 4 read as 1, or a less-indented line
    cut into its text."""
    grid = "Input:\n```\n  #\n ##\n```\nOutput:\n```\n2\n```"
    assert pairs(grid) == [("  #\n ##\n", "2\n")]
    listed = "- Input:\n  ```\n    #\n   ##\n  ```\n- Output:\n  ```\n  2\n  ```"
    assert pairs(listed) == [("  #\n ##\n", "2\n")]
    numbered = "1. Input:\n    ```\n    1 2\n    ```\n2. Output:\n    ```\n    3\n    ```"
    assert pairs(numbered) == [("1 2\n", "3\n")]
    assert pairs("    ```input\n1 2\n  3\n    ```\n```output\n3\n```") == [("1 2\n3\n", "3\n")]


def test_an_unlabelled_block_is_an_output_only_right_after_an_input():
    """The block before decides, not the first: after an input/output pair, an unlabelled
    block is no test. Fault: it was read as an output without its input (one invalid test
    more in the suite)."""
    assert pairs("```input\n1\n```\n```output\n2\n```\n```\n3\n```") == [("1\n", "2\n")]


def test_cut_off_blocks_count_once_each():
    """An unclosed block after an unpaired input is that input's error and its own (two
    invalid tests, each recording its block as written: what `codea1 judge` shows), unless
    it is the input's output cut off (one); an unclosed output alone is one. Faults: an
    input then an unclosed input (or json) block counted as one cut-off test; the unpaired
    input recorded as its bare text; an unclosed output alone crashed the reader."""
    tests = parse_io_tests("```input\n1\n```\n```input\n2")
    assert [(t.source, t.reason) for t in tests] == [("```input\n1\n```", "an input without its output"),
                                                     ("```input\n2", "an unclosed input block")]
    assert pairs("```input\n1\n```\n```json\n[{\"input\": \"2\"") == [
        "an input without its output", "an unclosed json block"]
    assert pairs("```input\n1\n```\n```output\n2") == ["an unclosed output block"]
    assert pairs("Output:\n```\n5") == ["an unclosed output block"]


def test_a_line_naming_both_roles_or_a_code_fence_below_a_label_label_nothing():
    """`Input - Output:` names both roles: no block's label. A ```python, ```yaml or ```bash
    fence under `Input:` is not an input: only plain and text fences take the line above as
    their label. Faults: the first role won; a fence whose info string sorts
    before or after "json" took the label above it."""
    assert pairs("Input - Output:\n```\n7\n```") == []
    assert pairs("Input:\n```bash\n1\n```\nOutput:\n```bash\n1\n```") == []
    assert pairs("Input:\n```python\nprint(1)\n```\nOutput:\n```python\n1\n```") == []
    assert pairs("Input:\n```yaml\n1\n```\nOutput:\n```yaml\n1\n```") == []


def test_short_and_free_labels_keep_their_role():
    """`In:`/`Out:` and `My output:` label the block below as the fence labels `in`/`out`
    do; a ```json block under `In:` is that input written as JSON, as under `Input:`.
    Faults: `Out:` and `My output:` labelled nothing; the json blocks under `In:`/`Out:`
    were read as lists of tests (`json test 0 is not an object`...): a bug, fixed."""
    assert pairs("In:\n```\n5\n```\nOut:\n```\n10\n```") == [("5\n", "10\n")]
    assert pairs("Input:\n```\n5\n```\nMy output:\n```\n10\n```") == [("5\n", "10\n")]
    assert pairs("In:\n```json\n[1, 2, 3]\n```\nOut:\n```json\n6\n```") == [("[1, 2, 3]\n", "6\n")]
