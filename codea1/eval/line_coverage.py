"""Line coverage of a function under its tests, as UnLeakedTestBench's LineCov@k counts it.

UnLeakedTestBench runs ``pytest --cov --cov-branch`` on ``mod.py`` (its import header,
then the function) and reads coverage.py's ``num_statements`` and ``covered_lines``;
LineCov@k is the sum of covered statements over the sum of statements of all functions.
This module counts the same on the sandboxed executor without coverage.py:

- statements: the first line of every statement of the header and the function
  (docstrings are not statements; a multi-line statement is one, at its first line);
- covered: the statements whose lines a ``sys.settrace`` line event reaches while the
  module runs (imports, ``def`` lines, class bodies, module-level branches: what runs when
  pytest imports ``mod``, with coverage.py already measuring) and while the tests run.
  Every test runs, failing ones too, as pytest runs them all.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from codea1.eval.mutation_testing import harness, quiet
from codea1.sandbox import Job

_COVER_CALL = "__codea1_cover()"
_MODULE_FILE = "<codea1-module>"  # the file name the module runs under, told apart by the tracer


@dataclass(frozen=True)
class LineCoverage:
    statements: int
    covered: int

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.statements if self.statements else 0.0


def statement_lines(source: str) -> tuple[set[int], dict[int, int]]:
    """The statements' first lines and, for every line a statement's header spans, the
    first line it belongs to."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0]) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)}
    first: set[int] = set()
    owner: dict[int, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or id(node) in docstrings:
            continue
        first.add(node.lineno)
        body = getattr(node, "body", None)
        last = body[0].lineno - 1 if isinstance(body, list) and body and isinstance(body[0], ast.stmt) else node.end_lineno
        for line in range(node.lineno, max(node.lineno, last or node.lineno) + 1):
            owner.setdefault(line, node.lineno)
    return first, owner


def coverage_program(module: str, tests: Sequence[str]) -> str:
    """A program that runs ``module`` (compiled as its own file, so its line numbers are
    its own) and then each test under a line tracer, and whose call returns the lines of
    ``module`` seen executed: at import (class bodies, module-level branches, as
    coverage.py sees them when pytest imports ``mod``) and during the tests."""
    boot = (
        "import sys as __codea1_sys\n"
        "__codea1_seen = set()\n\n"
        "def __codea1_tracer(frame, event, arg):\n"
        f"    if frame.f_code.co_filename != {_MODULE_FILE!r}:\n"
        "        return None\n"
        "    if event == 'line':\n"
        "        __codea1_seen.add(frame.f_lineno)\n"
        "    return __codea1_tracer\n\n"
        "__codea1_sys.settrace(__codea1_tracer)\n"
        "try:\n"
        f"    exec(compile({module!r}, {_MODULE_FILE!r}, 'exec', dont_inherit=True), globals())\n"
        "finally:\n"
        "    __codea1_sys.settrace(None)\n"
    )
    text, calls, _ = harness(boot, tests)
    names = ", ".join(c[:-2] for c in calls if c)
    return text + (
        f"\n\ndef {_COVER_CALL[:-2]}():\n"
        f"    for test in ({names}{',' if names else ''}):\n"
        "        __codea1_sys.settrace(__codea1_tracer)\n"
        "        try:\n"
        "            test()\n"
        "        except Exception:\n"
        "            pass\n"
        "        finally:\n"
        "            __codea1_sys.settrace(None)\n"
        "    return sorted(__codea1_seen)\n"
    )


def line_coverage(executor, module: str, tests: Sequence[str], limits=None) -> LineCoverage:
    """Statements of ``module`` (the header and the function) and how many the tests cover."""

    first, owner = statement_lines(module)
    run = executor.run(Job(program=coverage_program(module, tests), calls=[_COVER_CALL], limits=quiet(limits)))
    if run.status == "infra":
        raise RuntimeError(f"sandbox infrastructure failure while measuring coverage: {run.infra_error}")
    if not run.program_ok:
        return LineCoverage(len(first), 0)
    seen: set[int] = set()
    call = run.calls[0] if run.calls else None
    value = call.value if call is not None and call.status == "ok" else None
    if isinstance(value, list) and len(value) == 2 and value[0] == "list":
        seen = {int(v[1]) for v in value[1] if isinstance(v, list) and len(v) == 2 and v[0] == "int"}
    covered = {owner[line] for line in seen if line in owner}
    return LineCoverage(len(first), len(covered & first))
