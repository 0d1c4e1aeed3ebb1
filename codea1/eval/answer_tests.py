"""Which tests a test model's answer holds, as runnable snippets, in the order written.

`eval tests` scores the first k of them. An answer may hold:

- bare asserts on the function: ``assert CALL == EXPECTED`` comes out of the judge's
  parser with the assignments before it substituted in; any other assert that calls the
  function (``assert f(x)``, ``assert abs(f(x) - y) < 1e-6``) is kept as written;
- pytest test functions, UnLeakedTestBench's own answer format (its prompt asks for
  ``def test_<name>():``): each assert written directly in a top-level ``def test*()`` body
  is one test, run after the body's statements before it that are not asserts, as the
  Code-A1 authors' UnLeakedTestBench fork cuts a test method at its first assert. The
  answer's imports, helper functions, classes and assignments written above the test
  function come first, as the test file would define them: not a star import, nor a copy
  of the function under test, which models often write above their tests (the fork keeps
  nothing above the method). ``@pytest.mark.parametrize`` gives one test per case
  (stacked ones, their product), as pytest collects them.

An assert or a test function that does not parse keeps its slot and fails (a test file
that does not parse passes nothing); one that never names the function tests nothing and is
not counted. Test classes (``class TestX``) and ``async def`` tests are not read.
"""

from __future__ import annotations

import ast
import itertools
import re
import textwrap

from codea1.judge import extract_test_source, parse_tests
from codea1.judge.parse import PARSE_ERRORS  # (also what ast.unparse raises on a tree too deep)

__all__ = ["answer_tests", "select_tests"]

_TEST_FUNCTION = re.compile(r"\s*def\s+test\w*\s*\(")
#: The snippet standing for a test that cannot be read back: it keeps its slot and fails.
_UNREADABLE = "raise SyntaxError('a test nested too deeply to be read')"
#: Statements above a test function that its tests may rely on (a test file defines them).
_CONTEXT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _is_assert_on(source: str, name: str) -> bool:
    """Whether ``source`` is one assert on ``name``; one that does not parse counts when it
    reads as such (``assert f(2 == 2``): it is one of the model's k tests, and fails."""
    try:
        tree = ast.parse(source)
    except PARSE_ERRORS:
        return bool(re.match(r"assert\b", source.strip()) and re.search(rf"\b{re.escape(name)}\b", source))
    return [type(stmt) for stmt in tree.body] == [ast.Assert] and _mentions(tree, name)


def _is_context(stmt: ast.stmt, entry_point: str) -> bool:
    """Whether a statement above a test function is part of its test file: imports,
    helpers, classes and assignments, but no other test function, no star import (it is
    not allowed where the test runs, inside a function; the reference's module has its
    imports) and nothing that binds the function under test (models often copy the
    program above their tests: a test of that copy tests nothing)."""
    if not isinstance(stmt, _CONTEXT) or (isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test")):
        return False
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return all(a.name != "*" and (a.asname or a.name.split(".")[0]) != entry_point for a in stmt.names)
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return stmt.name != entry_point
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]  # type: ignore[union-attr]
    return not any(isinstance(n, ast.Name) and n.id == entry_point for t in targets for n in ast.walk(t))


def _parametrize_cases(fn: ast.FunctionDef) -> list[list[ast.stmt]] | None:
    """The bindings of each case of ``fn``'s ``parametrize`` decorators (one empty case when
    it has none), or None when a decorator's names or cases are not literals."""
    axes: list[list[ast.stmt]] = []
    for deco in fn.decorator_list:
        if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                and deco.func.attr == "parametrize"):
            continue
        if len(deco.args) < 2:  # pytest refuses a parametrize without its cases
            return None
        names_node, cases_node = deco.args[0], deco.args[1]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",") if n.strip()]
        elif isinstance(names_node, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names_node.elts):
            names = [e.value for e in names_node.elts]  # type: ignore[attr-defined]
        else:
            return None
        if not names or not all(n.isidentifier() for n in names) or not isinstance(cases_node, (ast.List, ast.Tuple)):
            return None
        single = len(names) == 1
        target: ast.expr = (ast.Name(id=names[0], ctx=ast.Store()) if single else
                            ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store()))
        axis = []
        for case in cases_node.elts:
            if isinstance(case, ast.Call) and isinstance(case.func, ast.Attribute) and case.func.attr == "param":
                if not case.args:
                    return None
                case = case.args[0] if single else ast.Tuple(elts=list(case.args), ctx=ast.Load())
            axis.append(ast.Assign(targets=[target], value=case, lineno=0))  # (ast.unparse reads a lineno)
        axes.append(axis)
    return [list(bindings) for bindings in itertools.product(*axes)]


def _function_tests(fn: ast.FunctionDef, context: list[ast.stmt], entry_point: str) -> list[str]:
    """The tests of one test function: each direct assert after the body's other statements
    before it, under the answer's context and each parametrize case."""
    cases = _parametrize_cases(fn)
    takes = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    if cases is None or (takes and cases == [[]]):
        # pytest looks for fixtures it does not have (or cannot read the cases): the test errors
        cases = [ast.parse(f"raise TypeError({f'{fn.name} takes {takes} that no case gives'!r})").body]
    tests: list[str] = []
    setup: list[ast.stmt] = []
    for stmt in fn.body:
        if not isinstance(stmt, ast.Assert):
            setup.append(stmt)
            continue
        if not _mentions(ast.Module(body=[*setup, stmt], type_ignores=[]), entry_point):
            continue
        for bindings in cases:
            try:
                tests.append("\n".join(ast.unparse(s) for s in (*context, *bindings, *setup, stmt)))
            except PARSE_ERRORS:
                tests.append(_UNREADABLE)
    return tests


def _module(source: str) -> list[ast.stmt]:
    """The answer's top-level statements (none when it does not parse as a whole: each
    test is then read on its own, without the answer's imports and helpers)."""
    try:
        return ast.parse(textwrap.dedent(source)).body
    except PARSE_ERRORS:
        return []


def answer_tests(completion: str, entry_point: str, limit: int | None = None) -> list[str]:
    """Every test of ``completion`` (the first ``limit`` of them), as snippets to run after
    the function under test (see the module docstring for what counts)."""
    source = extract_test_source(completion)
    tests: list[str] = []
    module: list[ast.stmt] | None = None  # read when the first test function needs it
    for parsed in parse_tests(source, entry_point):
        if parsed.normalized:  # (None unless the test reads as `assert CALL == EXPECTED`)
            tests.append(parsed.normalized)
        elif _is_assert_on(parsed.source, entry_point):
            tests.append(parsed.source)
        elif _TEST_FUNCTION.match(parsed.source):
            if module is None:
                module = _module(source)
            fn = {s.lineno: s for s in module if isinstance(s, ast.FunctionDef)}.get(parsed.line)
            if fn is None:  # the answer does not parse as a whole: this function alone
                try:
                    fn = ast.parse(textwrap.dedent(parsed.source)).body[0]  # type: ignore[assignment]
                except PARSE_ERRORS:
                    if re.search(rf"\b{re.escape(entry_point)}\b", parsed.source):
                        tests.append(parsed.source)  # a broken test function: one slot, failing
                    continue
            above = [s for s in module if s.lineno < parsed.line and _is_context(s, entry_point)]
            tests.extend(_function_tests(fn, above, entry_point))  # type: ignore[arg-type]
    return tests if limit is None else tests[:limit]


def select_tests(completion: str, entry_point: str, k: int) -> list[str]:
    """The first ``k`` tests of a completion (`answer_tests`)."""
    return answer_tests(completion, entry_point, k)
