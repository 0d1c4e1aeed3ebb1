"""Read a test completion the way the Code-A1 reference reads it (the judge's default).

The reference does not parse a test block as a program. It joins the completion's closed
```` ```python ```` blocks and reads them line by line, each line stripped of its
indentation, joining lines only while brackets are open. Each piece that parses on its own
is read: `NAME = VALUE` remembers VALUE for NAME; an `assert` whose test is a comparison
with a call on its left is a test `CALL == EXPECTED` (whatever the operator, first
right-hand side), where a call argument (positional or keyword) that is a bare remembered
NAME is replaced by its VALUE. Nothing else is substituted, and every other piece (a
`def test_...():` or `for` header, prose, `result = f(1)` then `assert result == 2`) is
skipped, so the asserts inside function bodies, loops and `with` blocks are tests too,
with whatever names they use: names the substitution left are looked up when the test
runs (in the reference program's namespace), and a test whose name is undefined there is
invalid. Without a closed python block, each line that starts with `assert` is one test,
read alone (its CALL and EXPECTED taken as they parse, never re-read: `== (not x)` keeps
its meaning), and one that is not of that shape is invalid.

(`judge.statement_reading` switches to the project's statement-level reading in
`codea1.judge.parse`.) Parsing is pure AST work: nothing the model wrote runs here.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any

from codea1.judge.parse import PARSE_ERRORS, ParsedTest, _literal_value, _strict_violation

__all__ = ["read_reference_tests", "python_blocks"]

_OPENING = "```python"
_FENCE = "```"
# String literals (single-line, with escapes) and comments: their brackets do not count.
_NOT_CODE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|#.*')
_OPERATOR_NAMES = {ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                   ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def python_blocks(text: str) -> list[str]:
    """The bodies of the closed ```python blocks of `text` (the text right after the tag up
    to the next fence), in order."""
    bodies, pos = [], 0
    while True:
        start = text.find(_OPENING, pos)
        if start < 0:
            return bodies
        end = text.find(_FENCE, start + len(_OPENING))
        if end < 0:
            return bodies
        bodies.append(text[start + len(_OPENING):end])
        pos = end + len(_FENCE)


def _pieces(source: str) -> list[tuple[int, str]]:
    """`(first line number, text)` of each piece: a line, or lines joined while brackets
    stay open (a new `assert` line while brackets are open starts afresh)."""
    pieces: list[tuple[int, str]] = []
    buffer: list[str] = []
    first = 0
    depth = 0
    for number, line in enumerate(source.split("\n"), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if depth < 0 or (depth > 0 and stripped.startswith("assert ")):
            buffer, depth = [], 0
        if not buffer:
            first = number
        buffer.append(line)
        code = _NOT_CODE.sub("", stripped)
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth == 0 and not stripped.endswith("\\"):
            pieces.append((first, "\n".join(buffer).strip()))
            buffer = []
    return pieces


def _parse(text: str, cache: dict[str, list[ast.stmt] | None] | None) -> list[ast.stmt] | None:
    if cache is not None and text in cache:
        return cache[text]
    try:
        body: list[ast.stmt] | None = ast.parse(text).body
    except PARSE_ERRORS:
        body = None
    if cache is not None:
        cache[text] = body
    return body


class _NotATest(ValueError):
    """The rebuilt `assert CALL == EXPECTED` is no test (the message says why)."""


def _looser_than_eq(node: ast.expr) -> bool:
    """Whether `node` binds more loosely than `==` (`not x`, `a and b`, `a if c else b`,
    `a == b`, a lambda): its text written bare after `==` would be read otherwise."""
    return isinstance(node, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.Compare, ast.NamedExpr)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))


def _reread(call: ast.Call, right: ast.expr) -> tuple[ast.expr, ast.expr]:
    """A python block's test as the reference reads it: it writes `assert CALL == EXPECTED`
    from the two parts' text and parses that again, so an EXPECTED that needs its
    parentheses (`not x`, `a and b`, `x if c else y`, `a == b`) changes meaning or stops
    parsing."""
    try:
        text = f"assert {ast.unparse(call)} == {ast.unparse(right)}"
        body = ast.parse(text).body
    except (SyntaxError, RecursionError, ValueError, MemoryError, OverflowError) as err:
        raise _NotATest("`assert CALL == EXPECTED` written from its parts does not parse "
                        f"({type(err).__name__}): EXPECTED needs its parentheses") from None
    node = body[0] if len(body) == 1 else None
    test = node.test if isinstance(node, ast.Assert) else None
    if not isinstance(test, ast.Compare) or not isinstance(test.left, ast.Call):
        raise _NotATest("`assert CALL == EXPECTED` written from its parts is no comparison with a call "
                        "on its left: EXPECTED needs its parentheses")
    return test.left, test.comparators[0]


class _Reader:
    def __init__(self, entry_point: str | None, strict: bool, require_entry_point: bool,
                 strict_operator: bool) -> None:
        self.entry_point = entry_point
        self.strict = strict
        self.require_entry = require_entry_point and entry_point is not None
        self.strict_operator = strict_operator

    def test(self, node: ast.Assert, source: str, line: int, env: dict[str, ast.expr],
             reread: bool = True) -> ParsedTest | None:
        """The test an assert stands for; None when the reference skips it. `reread`: the
        reference rebuilds the assert's text and parses it again (a python block's tests);
        a bare assert line's parts it takes as they are (`_reread`)."""
        compare = node.test
        if not isinstance(compare, ast.Compare) or not isinstance(compare.left, ast.Call):
            return None
        if self.strict_operator and (len(compare.ops) != 1 or not isinstance(compare.ops[0], ast.Eq)):
            op = _OPERATOR_NAMES.get(type(compare.ops[0]), "a chained comparison")
            return ParsedTest(source, line, reason=f"comparison with `{op}`; expected `assert CALL == EXPECTED`")
        left, right = compare.left, compare.comparators[0]
        # only a bare remembered name given as an argument stands for its value
        args = [env[a.id] if isinstance(a, ast.Name) and a.id in env else a for a in left.args]
        keywords = [ast.keyword(arg=k.arg, value=env[k.value.id])
                    if isinstance(k.value, ast.Name) and k.value.id in env else k for k in left.keywords]
        call = ast.Call(func=left.func, args=args, keywords=keywords)
        if self.require_entry and not any(isinstance(n, ast.Name) and n.id == self.entry_point
                                          for n in ast.walk(call)):
            return ParsedTest(source, line, reason=f"the call does not use the function under test `{self.entry_point}`")
        if reread:
            try:
                call, right = _reread(call, right)
            except _NotATest as err:
                return ParsedTest(source, line, reason=str(err))
        violation_call = _strict_violation((call,), self.entry_point)
        violation_expected = _strict_violation((right,), self.entry_point)
        if self.strict and (violation_call or violation_expected):
            return ParsedTest(source, line, reason=violation_call or violation_expected)
        call_text, expected_text = ast.unparse(call), ast.unparse(right)
        if not reread and _looser_than_eq(right):  # (kept in its parentheses: `assert CALL == EXPECTED` reads it so)
            expected_text = f"({expected_text})"
        try:
            literal: tuple[Any] | None = (_literal_value(right),)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            literal = None
        return ParsedTest(source, line, call=call_text, expected=expected_text, expected_literal=literal,
                          call_apart=violation_call is not None,
                          expected_apart=literal is None and violation_expected is not None)

    def blocks(self, source: str, cache: dict | None) -> list[ParsedTest]:
        env: dict[str, ast.expr] = {}
        tests: list[ParsedTest] = []
        for line, text in _pieces(source):
            body = _parse(text, cache)
            for node in body or ():
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)):
                    env[node.targets[0].id] = node.value
                elif isinstance(node, ast.Assert):
                    test = self.test(node, text, line, env)
                    if test is not None:
                        tests.append(test)
        return tests

    def assert_lines(self, text: str, cache: dict | None) -> list[ParsedTest]:
        tests = []
        for number, raw in enumerate(text.split("\n"), 1):
            line = raw.strip()
            if not line.startswith("assert"):
                continue
            body = _parse(line, cache)
            node = body[0] if body else None
            test = self.test(node, line, number, {}, reread=False) if isinstance(node, ast.Assert) else None
            if test is None:
                why = "does not parse" if body is None else "not of the form `assert CALL == EXPECTED`"
                test = ParsedTest(line, number, reason=why)
            tests.append(test)
        return tests


def read_reference_tests(text: str, entry_point: str | None = None, *, strict: bool = False,
                         require_entry_point: bool = False, strict_operator: bool = False,
                         cache: dict | None = None) -> list[ParsedTest]:
    """The tests of a raw test completion, read as the reference reads them (module docstring).

    The options are the project's switches: `require_entry_point` (a call that never names
    the function under test is an invalid test), `strict` (a test may only build data, see
    `parse_tests`), `strict_operator` (only `==` reads as a test, another comparison is an
    invalid one). `cache` (a dict kept per problem) shares the parsing of repeated pieces.
    """
    reader = _Reader(entry_point, strict, require_entry_point, strict_operator)
    with warnings.catch_warnings():  # the SyntaxWarnings model text provokes
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        blocks = python_blocks(text)
        if blocks:
            return reader.blocks("\n".join(blocks), cache)
        return reader.assert_lines(text, cache)
