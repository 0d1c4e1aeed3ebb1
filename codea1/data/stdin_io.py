"""Standard-input problems: their input/output tests, how outputs compare, and the prompts.

A stdin problem (`Problem.kind == "stdin"`) asks for a complete program that reads
standard input and prints its answer; its golden tests are input/output pairs, stored in
`Problem.tests` in the canonical form `{"input": ..., "output": ...}` (one JSON object a
string: `io_test`/`read_io_test`). Its `meta` may hold `time_limit_s` (per input),
`float_tolerance` (absolute and relative, for tokens that are numbers) and `checker` (a
Python program defining `check(input, expected, output) -> bool`, for problems with
several right answers).

Test-model output (`parse_io_tests`), the format the prompt asks for::

    ```input
    3
    1 2 3
    ```
    ```output
    6
    ```

one such pair per test. Also read, because small models write them: `in`/`stdin`/`out`/
`stdout`/`expected` fence labels; an unlabelled or `text` fence labelled by the line just
before it (`Input:`, `**Output**:`, `### Test 2 input`, `Example 1 Input:`, `Test #1
input:`, `Expected output for test 1:`), or made a test's input by a heading that names a
test and no role (`### Test 2`, `Example 1:`); an unlabelled fence right after an input
block (blank lines between at most) as its output; and a ```` ```json ```` block holding a
list of `{"input": ..., "output": ...}` objects, unless the line before labels it (then it
is that input or output, written as JSON). Only lines outside fences are labels: a block's
lines are data, whatever they say. A completion with no fenced test at all is read for
tests written without fences: a label line alone and the lines below it (`Input:` / `3` /
`1 2 3` / `Output:` / `6`), a label ending in one code span (`**Input**: `3 1 2 3``), and
such lines inside an unlabelled or plain fence. Anything else that looks like a
test (an input without its output, an output without its input, an unclosed block, a
malformed JSON test) is an unparsable test, which counts invalid; an output block cut off
by the end of the completion is one with its input, as a cut-off assert is one. A fence
indented (in a list) loses that indentation from its lines, as in Markdown. An input is
run as written, blank lines and spaces included (a problem may read an empty line), with
a final newline added where it lacks one (`input_as_run`); `normalize_input` is only a
key, for duplicate inputs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from codea1.data.problem import IOTest, Problem, read_io_test

if TYPE_CHECKING:
    from codea1.sandbox.types import Limits

__all__ = [
    "FUNCTION",
    "IOTest",
    "ParsedIOTest",
    "STDIN",
    "checker_of",
    "golden_io_tests",
    "input_as_run",
    "io_test",
    "normalize_input",
    "outputs_match",
    "parse_io_tests",
    "read_io_test",
    "run_limits",
    "stdin_code_messages",
    "stdin_test_messages",
    "time_limit_of",
    "tolerance_of",
]

FUNCTION = "function"
STDIN = "stdin"
KINDS = (FUNCTION, STDIN)

CODE_SYSTEM = "You are a helpful code-completion assistant."
CODE_INSTRUCTION = (
    "Write a complete Python 3 program that solves the problem below. It reads the input "
    "from standard input and prints the answer to standard output, exactly in the format "
    "the problem asks for. Output the whole program inside one ```python code block and "
    "nothing else."
)
TEST_SYSTEM = "You are a helpful test-generation assistant."


@dataclass(frozen=True)
class ParsedIOTest:
    """One test as the test model wrote it: `input` as it is run (`input_as_run`) and
    `output`, or `reason` why it is unparsable (then `input` is None)."""

    source: str
    input: str | None
    output: str | None
    reason: str | None = None

    @property
    def key(self) -> str | None:
        """The input normalized: two tests of a suite with the same key are duplicates."""
        return None if self.input is None else normalize_input(self.input)


def normalize_input(text: str) -> str:
    """Trailing spaces of each line and blank lines at the ends dropped, one final newline
    (an empty input stays empty): what two tests share when they give the same input."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    body = "\n".join(lines).strip("\n")
    return body + "\n" if body else ""


def input_as_run(text: str) -> str:
    """`text` as a program reads it: unchanged but for a final newline added where a
    non-empty text lacks one. Not normalized: blank lines and spaces may be the input."""
    return text if not text or text.endswith("\n") else text + "\n"


def io_test(input_text: str, output_text: str) -> str:
    """The canonical stored form of a test (golden tests, the Mistake Book)."""
    return json.dumps({"input": input_text, "output": output_text}, ensure_ascii=False, sort_keys=True)


def golden_io_tests(problem: Problem) -> list[IOTest]:
    """The problem's golden tests as input/output pairs."""
    return [read_io_test(t, f"problem {problem.id}, golden test {i}") for i, t in enumerate(problem.tests)]


def time_limit_of(problem: Problem, default: float) -> float:
    """The problem's time limit per input in seconds (`meta.time_limit_s`), else `default`."""
    value = problem.meta.get("time_limit_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def run_limits(problem: Problem, limits: Limits, time_scale: float = 1.0) -> Limits:
    """The limits of one run of a program of `problem`: the problem's time limit per input
    (else `limits.call_timeout_s`), times `time_scale`, as the call's, capped at
    `limits.timeout_s`. The training judge's rule (`codea1.judge.golden.stdin_limits`
    calls it), and `codea1 data check`'s, so it passes only what training's reference
    runs pass."""
    per_input = time_limit_of(problem, limits.call_timeout_s) * time_scale
    return replace(limits, call_timeout_s=max(0.05, min(per_input, limits.timeout_s)))


def tolerance_of(problem: Problem) -> float | None:
    """The problem's float tolerance (`meta.float_tolerance`), or None: exact tokens."""
    value = problem.meta.get("float_tolerance")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def checker_of(problem: Problem) -> str | None:
    """The problem's special checker program (`meta.checker`), or None."""
    value = problem.meta.get("checker")
    return value if isinstance(value, str) and value.strip() else None


def _tokens_equal(a: str, b: str, tolerance: float | None) -> bool:
    if a == b:
        return True
    if tolerance is None:
        return False
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return False
    if math.isinf(x) or math.isinf(y):  # (the relative bound of an infinity is infinite: any number is within it)
        return x == y
    return abs(x - y) <= tolerance * max(1.0, abs(y))


def outputs_match(output: str, expected: str, tolerance: float | None = None) -> bool:
    """Whether `output` is `expected` as contest judges compare: the same tokens (split on
    any whitespace, so line breaks and spacing do not matter); with `tolerance`, tokens
    that are both numbers may differ by `tolerance` absolutely or relatively."""
    got, want = output.split(), expected.split()
    return len(got) == len(want) and all(_tokens_equal(a, b, tolerance) for a, b in zip(got, want))


# ---- reading the test model's output ----------------------------------------------------

_INPUT_LABELS = frozenset({"input", "in", "stdin", "sample input", "test input"})
_OUTPUT_LABELS = frozenset({"output", "out", "stdout", "expected", "expected output", "expected_output",
                            "sample output", "test output"})
_PLAIN = frozenset({"", "text", "txt", "plaintext", "plain", "console", "shell", "none"})
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^`\n]*?)[ \t]*$")
_LABEL_LINE = re.compile(r"[#*_>\s]*(?:test(?:\s*case)?\s*\d*\s*[:.\-]?\s*)?([a-z _]+?)\s*\d*\s*[:.]?[*_\s]*$")


# A label line in other words than `_LABEL_LINE`'s: only role words, test words, a few
# fillers and numbers (`Example 1 Input:`, `Test #1 input:`, `**Input**:`, `Input for test
# 1:`), so that prose, quotes and code are never a label.
_ROLE_WORDS = {"input": "input", "stdin": "input", "output": "output", "stdout": "output", "expected": "output"}
_TEST_WORDS = frozenset({"test", "case", "example", "sample"})
_FILLER_WORDS = frozenset({"for", "the", "standard", "data"})
_HEADING = re.compile(r"[a-z0-9#*_>:.()\-\u2013\u2014\s]*")
_INLINE_DATA = re.compile(r":[^:]*\d")  # `Input: 5`: the input written on the label's line
_HEADING_WORD = re.compile(r"#?\d+|[a-z]+")


def _roles(text: str) -> set[str]:
    """The roles ("input", "output") the words of `text` name."""
    return {_ROLE_WORDS[w] for w in _HEADING_WORD.findall(text.lower()) if w in _ROLE_WORDS}


def _line_label(line: str) -> str | None:
    """"input" or "output" for a line that labels the block below it, "test" for a heading
    that names a test and no role (`### Test 2`, `Example 1:`), else None."""
    text = line.strip().lower()
    m = _LABEL_LINE.fullmatch(text)
    if m is not None:
        word = m.group(1).strip()
        if word in _INPUT_LABELS or word.endswith(" input"):
            return "input"
        if word in _OUTPUT_LABELS or word.endswith(" output"):
            return "output"
    if not _HEADING.fullmatch(text) or _INLINE_DATA.search(text):
        return None
    words = _HEADING_WORD.findall(text)
    if not all(w in _ROLE_WORDS or w in _TEST_WORDS or w in _FILLER_WORDS or w.lstrip("#").isdigit()
               for w in words):
        return None
    roles = _roles(text)
    if len(roles) == 1:
        return roles.pop()
    if not roles and any(w in _TEST_WORDS for w in words) and any(w.lstrip("#").isdigit() for w in words):
        return "test"
    return None


def _label(info: str, before: str, after_input: bool) -> str | None:
    """"input", "output", "json" or None for a fence with info string `info` after the line
    `before` ("" when only blank lines lie between it and the block before, which was an
    input block when `after_input`). The fence's own label wins; a label line makes a
    json block its input or output."""
    info = info.strip().lower()
    if info in _INPUT_LABELS:
        return "input"
    if info in _OUTPUT_LABELS:
        return "output"
    if info != "json" and info not in _PLAIN:
        return None
    label = _line_label(before) if before else None
    if info == "json":  # (`Test input and output:`, naming both roles, still heads a list of tests)
        return label if label in ("input", "output") and len(_roles(before)) < 2 else "json"
    if label == "test":
        return "input"
    if not before and after_input:
        return "output"
    return label


def _closes(line: str, fence: str) -> bool:
    """Whether `line` closes a block its `fence` opened: that character alone, at least as
    many times (as in Markdown)."""
    line = line.strip()
    return line.startswith(fence) and not line.strip(fence[0])


def _blocks(text: str) -> list[tuple[str | None, list[str], str, bool]]:
    """The fenced blocks of `text`: (label, body lines, source, closed). As in Markdown, a body
    line loses up to as much leading whitespace as its fence line has (a fence in a list).
    Only lines outside blocks label a block: a body line is never read."""
    lines = text.replace("\r\n", "\n").split("\n")
    blocks: list[tuple[str | None, list[str], str, bool]] = []
    i, before = 0, ""
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            if lines[i].strip():
                before = lines[i]
            i += 1
            continue
        fence, info = m.group(1), m.group(2)
        indent = len(lines[i]) - len(lines[i].lstrip(" \t"))
        body, j = [], i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip(" \t"))):])
            j += 1
        closed = j < len(lines)
        after_input = bool(blocks) and blocks[-1][0] == "input"
        blocks.append((_label(info, before, after_input), body, "\n".join(lines[i:j + 1]), closed))
        i, before = j + 1, ""
    return blocks


def _json_tests(body: str, source: str) -> list[ParsedIOTest]:
    try:
        data = json.loads(body)
    except ValueError as err:
        return [ParsedIOTest(source, None, None, f"a json block that does not parse ({err.msg})")]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return [ParsedIOTest(source, None, None, "a json block that is not a list of tests")]
    out = []
    for k, item in enumerate(data):
        text = json.dumps(item, ensure_ascii=False)
        if not isinstance(item, dict):
            out.append(ParsedIOTest(text, None, None, f"json test {k} is not an object"))
            continue
        inp = next((item[key] for key in ("input", "stdin") if key in item), None)
        outp = next((item[key] for key in ("output", "expected_output", "expected", "stdout") if key in item), None)
        if not isinstance(inp, str) or not isinstance(outp, str):
            out.append(ParsedIOTest(text, None, None, f"json test {k} lacks string `input` and `output`"))
            continue
        out.append(ParsedIOTest(text, input_as_run(inp), outp))
    return out


_CODE_SPAN = re.compile(r"(.*?)`([^`]+)`[\s.,;*_]*")  # `**Input**: `3 1 2``: a label, then its data
_NOT_DATA = re.compile(r"#|[-*+]\s|\d+\.\s")  # a heading or a list item ends an unfenced block


def _unfenced_blocks(text: str) -> list[tuple[str | None, list[str], str, bool]]:
    """Input and output blocks written without fences, as `_blocks` gives fenced ones: a
    label line alone and the lines below it up to a blank line, a fence, a heading, a list
    item or the next label (`Input:` / `3` / `1 2 3`), or a label line ending in one code
    span (`**Input**: `3``, `- Expected Output: `6``; not a heading, which sums a test up:
    `### Test 1: Input `4``). The lines of an unlabelled or plain fence are read as lines
    (a ```plaintext block holding `input` / `3` / `output` / `6`); other fences' (```python)
    are skipped. Data lines lose their surrounding spaces (list indentation)."""
    blocks: list[tuple[str | None, list[str], str, bool]] = []
    label, data, source = None, [], []

    def close() -> None:
        nonlocal label, data, source
        if label is not None and data:
            blocks.append((label, data, "\n".join(source), True))
        label, data, source = None, [], []

    fence, read = None, True  # the open fence's marker, and whether its lines are read
    for line in text.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        m = _FENCE.match(line)
        if fence is not None and _closes(line, fence):
            fence, read = None, True
            close()
            continue
        if fence is None and m is not None:
            fence, read = m.group(1), m.group(2).strip().lower() in _PLAIN
            close()
            continue
        if not read:
            continue
        role = _line_label(line) if stripped else None
        span = _CODE_SPAN.fullmatch(stripped) if role is None and not stripped.startswith("#") else None
        span_role = _line_label(span.group(1)) if span is not None else None  # (a bare span: no label)
        if role in ("input", "output"):
            close()
            label, source = role, [line]
        elif span_role in ("input", "output"):
            close()
            blocks.append((span_role, [span.group(2).strip()], line, True))
        elif not stripped or role == "test" or _NOT_DATA.match(stripped):
            close()
        elif label is not None:
            data.append(stripped)
            source.append(line)
    close()
    return blocks


def parse_io_tests(text: str) -> list[ParsedIOTest]:
    """The tests of one test-model completion, in order (see the module docstring). A
    completion with no fenced test at all is read for unfenced ones (`_unfenced_blocks`),
    so that what reads as fenced tests keeps its meaning."""
    return _pair(_blocks(text)) or _pair(_unfenced_blocks(text))


def _pair(blocks: list[tuple[str | None, list[str], str, bool]]) -> list[ParsedIOTest]:
    """Tests from labelled blocks in order: each input with the output after it."""
    tests: list[ParsedIOTest] = []
    pending: tuple[str, str] | None = None  # an input block waiting for its output: (input, source)
    for label, lines, source, closed in blocks:
        body = "\n".join(lines)
        if label is None:
            continue
        if not closed:
            if pending is not None and label == "output":  # one test cut off: one unparsable
                tests.append(ParsedIOTest(pending[1] + "\n" + source, None, None, "an unclosed output block"))
                pending = None
                continue
            if pending is not None:
                tests.append(ParsedIOTest(pending[1], None, None, "an input without its output"))
                pending = None
            tests.append(ParsedIOTest(source, None, None, f"an unclosed {label} block"))
            continue
        if label == "json":
            if pending is not None:
                tests.append(ParsedIOTest(pending[1], None, None, "an input without its output"))
                pending = None
            tests.extend(_json_tests(body, source))
        elif label == "input":
            if pending is not None:
                tests.append(ParsedIOTest(pending[1], None, None, "an input without its output"))
            pending = ("".join(line + "\n" for line in lines), source)  # each line as written
        elif pending is None:
            tests.append(ParsedIOTest(source, None, None, "an output without its input"))
        else:
            tests.append(ParsedIOTest(pending[1] + "\n" + source, pending[0], body + "\n"))
            pending = None
    if pending is not None:
        tests.append(ParsedIOTest(pending[1], None, None, "an input without its output"))
    return tests


# ---- prompts -----------------------------------------------------------------------------


def stdin_code_messages(question: str) -> list[dict[str, str]]:
    """The code model's prompt for a stdin problem."""
    return [
        {"role": "system", "content": CODE_SYSTEM},
        {"role": "user", "content": f"{CODE_INSTRUCTION}\n\nProblem:\n{question.strip()}"},
    ]


_TEST_FORMAT = "```input\n<the whole standard input>\n```\n```output\n<the exact expected output>\n```"


def stdin_test_messages(question: str, code: str | None, white_box: bool, n_tests: int) -> list[dict[str, str]]:
    """The test model's prompt for a stdin problem: Role, Task, Strategy, Context, Output
    format, as for functions, with input/output pairs instead of asserts."""
    if white_box:
        role = "You find inputs on which the `Buggy code` does not print what the `Problem` requires."
        task = (f"Write {n_tests} test cases (an input and its exact expected output) that expose the bugs "
                "of the program in `Buggy code`, judged against the `Problem`.")
        gaps = ("1. **Logic gaps**: find where the `Buggy code` is simpler than the `Problem` (missing "
                "constraints, misread rules, wrong output format) and choose inputs that land there.")
    else:
        role = "You write test cases that check whether a program does what the `Problem` requires."
        task = f"Write {n_tests} test cases (an input and its exact expected output) for the `Problem`."
        gaps = ("1. **Likely mistakes**: choose inputs where a program is easily wrong (edge cases, "
                "easily misread rules, limits of the constraints).")
    strategy = "\n".join([
        gaps,
        "2. **Valid inputs only**: every input must follow the `Problem`'s input format and constraints.",
        "3. **No redundancy**: no trivial or repeated tests. Only the first few tests are evaluated, "
        "so order them by how much they reveal.",
    ])
    context = f"Problem:\n{question.strip()}"
    if white_box:
        if code is None:
            raise ValueError("stdin_test_messages: white_box=True needs the candidate code")
        context += f"\n\nBuggy code:\n```python\n{code.rstrip()}\n```"
    output = f"For each test case write an input block followed by its output block:\n{_TEST_FORMAT}"
    user = "\n\n".join([f"# Role\n{role}", f"# Task\n{task}", f"# Strategy\n{strategy}",
                         f"# Context\n{context}", f"# Output format\n{output}"])
    return [{"role": "system", "content": TEST_SYSTEM}, {"role": "user", "content": user}]
