"""Input/output tests written without fences, the forms the bundled 0.5B test model writes
most often when it ignores the prompt's ```input / ```output blocks: read only where the
completion holds no fenced test, so a completion that parsed before keeps its meaning."""

from __future__ import annotations

from codea1.data.stdin_io import parse_io_tests


def _pairs(text: str) -> list[tuple[str | None, str | None]]:
    return [(t.input, t.output) for t in parse_io_tests(text)]


def test_label_lines_alone_take_the_lines_below_them():
    text = ("### Test case 1:\nInput:\n5\n1 2 3 4 5\nOutput:\n15\n\n"
            "### Test case 2:\nInput:\n0\n\nOutput:\n0\n")
    assert _pairs(text) == [("5\n1 2 3 4 5\n", "15\n"), ("0\n", "0\n")]


def test_a_label_ending_in_one_code_span_is_that_block():
    text = ("### Test Case 1\n**Input**: `3 1 2 3`\n**Expected Output**: `6`\n\n"
            "2. Input: `4 6`\n   - Expected Output: `2 12`\n")
    assert _pairs(text) == [("3 1 2 3\n", "6\n"), ("4 6\n", "2 12\n")]


def test_label_lines_inside_a_plain_fence_are_read():
    text = "```plaintext\n\ninput\n3\n1 2 3\noutput\n6\n\ninput\n0\noutput\n0\n```"
    assert _pairs(text) == [("3\n1 2 3\n", "6\n"), ("0\n", "0\n")]


def test_the_data_ends_at_a_blank_line_a_heading_or_a_list_item():
    text = "Input:\n  3\n  1 2 3\nOutput:\n6\n- Explanation: the sum\nInput:\n2\n# Why\nOutput:\n1\n* because\n"
    assert _pairs(text) == [("3\n1 2 3\n", "6\n"), ("2\n", "1\n")]


def test_a_label_without_data_leaves_its_partner_unparsable():
    tests = parse_io_tests("Input:\n4\nOutput:\n\nInput:\n5\nOutput:\n120\n")
    assert [(t.input, t.output, t.reason) for t in tests] == [
        (None, None, "an input without its output"), ("5\n", "120\n", None)]


def test_python_blocks_and_prose_are_not_read():
    text = ("```python\nInput:\n3\nOutput:\n6\n```\n"
            "The input format: `n` then `n` numbers. Input is one line; Output: the sum `s`.\n")
    assert parse_io_tests(text) == []


def test_a_completion_with_a_fenced_test_is_read_as_before():
    text = "Input:\n9\nOutput:\n81\n\n```input\n3\n```\n```output\n9\n```\n"
    assert _pairs(text) == [("3\n", "9\n")]
    # an unparsable fenced test is a fenced test too: the unfenced pair is still not read
    assert _pairs("Input:\n9\nOutput:\n81\n\n```input\n3\n```\n") == [(None, None)]


def test_a_heading_s_code_span_sums_a_test_up_and_is_not_its_input():
    """The 0.5B model writes `### Test Case 1: Input `4`` above the whole input (4 being n)."""
    assert parse_io_tests("### Test Case 1: Input `4`\n```\n7\n```") == []
    assert _pairs("### Test 1: Input `4`\nInput:\n4\n3 9 1 4\nOutput:\n8\n") == [("4\n3 9 1 4\n", "8\n")]


def test_the_lines_after_a_skipped_python_block_are_read_again():
    text = "```python\nprint(sum(map(int, input().split())))\n```\nInput:\n1 2\nOutput:\n3\n\n`7`\nOutput:\n7\n"
    assert [(t.input, t.output, t.reason) for t in parse_io_tests(text)] == [
        ("1 2\n", "3\n", None), (None, None, "an output without its input")]
