"""Turn pytest test code that imports from `solution` into a golden test program.

KodCode's tests are pytest modules (`from solution import f`, plain `assert`s,
`pytest.raises`, `@pytest.mark.parametrize`, module fixtures, `Test*` classes). The
program built here runs after the candidate code in the same namespace, without pytest
collecting anything: it registers a `solution` module that resolves names to the
candidate's globals, defines the test functions, and calls each one (expanding
parametrize marks, resolving fixtures defined in the file plus `tmp_path`, `tmpdir`,
`capsys`, `monkeypatch`), then raises AssertionError naming the first failure. Test names are
fixed at load time from the test code's AST, so candidate code cannot add or hide tests.
"""

from __future__ import annotations

import ast

from codea1.data.formats._code import parse
from codea1.data.problem import ProblemFormatError

_PRELUDE = '''
import sys as _codea1_sys
import types as _codea1_types


def _codea1_solution_module(namespace):
    module = _codea1_types.ModuleType("solution")
    module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__")})

    def __getattr__(name):
        try:
            return namespace[name]
        except KeyError:
            raise AttributeError(f"the candidate does not define {name!r}") from None

    module.__getattr__ = __getattr__
    return module


_codea1_sys.modules["solution"] = _codea1_solution_module(globals())
'''

_RUNNER = '''

def _codea1_run_pytest(tests, fixtures, autouse):
    import contextlib
    import inspect
    import io
    import pathlib
    import sys
    import tempfile
    import unittest

    namespace = globals()
    failures = []
    ran = 0

    class Capture:
        """The part of pytest's `capsys` that tests use: readouterr() -> (out, err)."""

        def __init__(self):
            self.out, self.err = io.StringIO(), io.StringIO()
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = self.out, self.err

        def readouterr(self):
            import collections
            result = collections.namedtuple("CaptureResult", "out err")(
                self.out.getvalue(), self.err.getvalue()
            )
            self.out.seek(0), self.out.truncate(), self.err.seek(0), self.err.truncate()
            return result

        def close(self):
            sys.stdout, sys.stderr = self._saved

    def builtin(name, finalizers):
        if name == "tmp_path":
            return pathlib.Path(tempfile.mkdtemp())
        if name == "tmpdir":
            import py  # pytest's legacy path shim
            return py.path.local(tempfile.mkdtemp())
        if name in ("capsys", "capfd"):
            capture = Capture()
            finalizers.append(capture.close)
            return capture
        if name == "monkeypatch":
            import pytest
            patcher = pytest.MonkeyPatch()
            finalizers.append(patcher.undo)
            return patcher
        raise RuntimeError(f"pytest fixture {name!r} is not supported by the golden test program")

    def resolve(name, cache, finalizers):
        if name in cache:
            return cache[name]
        if name in fixtures:
            function = namespace[name]
            kwargs = {p: resolve(p, cache, finalizers) for p in inspect.signature(function).parameters}
            value = function(**kwargs)
            if inspect.isgenerator(value):
                generator, value = value, next(value)
                finalizers.append(lambda g=generator: next(g, None))
        else:
            value = builtin(name, finalizers)
        cache[name] = value
        return value

    def parameter_sets(function):
        marks = list(getattr(function, "pytestmark", []))
        for mark in marks:
            if mark.name == "skip" or (mark.name == "skipif" and mark.args and mark.args[0]):
                return []
        combos = [{}]
        for mark in marks:
            if mark.name != "parametrize":
                continue
            names = mark.args[0] if mark.args else mark.kwargs["argnames"]
            values = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            rows = []
            for value in values:
                if all(hasattr(value, a) for a in ("values", "marks", "id")):
                    value = value.values
                elif len(names) == 1:
                    value = (value,)
                rows.append(dict(zip(names, value)))
            combos = [dict(a, **b) for a in combos for b in rows]
        return combos

    def run(function, label, setup=None, teardown=None):
        nonlocal ran
        for params in parameter_sets(function):
            cache, finalizers = dict(params), []
            try:
                if setup is not None:
                    setup()
                for name in autouse:
                    resolve(name, cache, finalizers)
                kwargs = {
                    p: resolve(p, cache, finalizers) for p in inspect.signature(function).parameters
                }
                ran += 1
                function(**kwargs)
            except BaseException as exc:
                if type(exc).__name__ in ("Skipped", "SkipTest", "XFailed"):
                    continue
                failures.append(f"{label}{params or ''}: {type(exc).__name__}: {exc}")
            finally:
                for finalize in reversed(finalizers):
                    with contextlib.suppress(BaseException):
                        finalize()
                if teardown is not None:
                    with contextlib.suppress(BaseException):
                        teardown()

    for name in tests:
        target = namespace[name]
        if isinstance(target, type) and issubclass(target, unittest.TestCase):
            result = unittest.TestResult()
            suite = unittest.TestLoader().loadTestsFromTestCase(target)
            suite.run(result)
            ran += result.testsRun
            failures.extend(f"{name}: {t[1].strip().splitlines()[-1]}" for t in result.failures + result.errors)
        elif isinstance(target, type):
            for attr in list(vars(target)):
                if not attr.startswith("test") or not callable(getattr(target, attr)):
                    continue
                instance = target()
                method = getattr(instance, attr)
                setup = getattr(instance, "setup_method", None)
                teardown = getattr(instance, "teardown_method", None)
                run(
                    method,
                    f"{name}.{attr}",
                    (lambda s=setup, m=method: s(m)) if setup else None,
                    (lambda t=teardown, m=method: t(m)) if teardown else None,
                )
        else:
            run(target, name)
    if failures or ran == 0:
        first = failures[0] if failures else "no test ran"
        raise AssertionError(f"{len(failures)} of {ran} test cases failed; first: {first[:500]}")


_codea1_run_pytest(__TESTS__, __FIXTURES__, __AUTOUSE__)
'''


def _fixture_decorator(node: ast.expr) -> tuple[bool, bool]:
    """(is a pytest fixture decorator, autouse=True)."""
    target = node.func if isinstance(node, ast.Call) else node
    name = ast.unparse(target)
    if name not in ("pytest.fixture", "fixture"):
        return False, False
    autouse = isinstance(node, ast.Call) and any(
        kw.arg == "autouse" and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in node.keywords
    )
    return True, autouse


def pytest_program(test: str, where: str, field_name: str = "test") -> str:
    """A golden test program for pytest code `test` (see the module docstring)."""
    tree = parse(test, where, field_name)
    tests: list[str] = []
    fixtures: list[str] = []
    autouse: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kept = []
            for decorator in node.decorator_list:
                is_fixture, is_autouse = _fixture_decorator(decorator)
                if is_fixture:
                    fixtures.append(node.name)
                    if is_autouse:
                        autouse.append(node.name)
                else:
                    kept.append(decorator)
            node.decorator_list = kept
            if node.name.startswith("test") and node.name not in fixtures:
                tests.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            tests.append(node.name)
    tests = list(dict.fromkeys(tests))  # a redefinition replaces, as in pytest
    if not tests:
        raise ProblemFormatError(where, field_name, "pytest code with at least one test_* function or Test* class")
    runner = (
        _RUNNER.replace("__TESTS__", repr(tests))
        .replace("__FIXTURES__", repr(sorted(set(fixtures))))
        .replace("__AUTOUSE__", repr(autouse))
    )
    return _PRELUDE + "\n" + ast.unparse(tree) + "\n" + runner
