"""Line coverage of a function under its tests, as UnLeakedTestBench's LineCov@k counts it.

UnLeakedTestBench runs ``pytest --cov --cov-branch`` on ``mod.py`` (its import header,
then the function) and reads coverage.py's ``num_statements`` and ``covered_lines``;
LineCov@k is the sum of covered statements over the sum of statements of all functions.
This module counts the same on the sandboxed executor without coverage.py:

- statements: as coverage.py finds them, the lines of the compiled code's line tables
  (so an ``except`` line and a decorator line are statements; ``global``, a bare
  annotation and code the compiler drops as unreachable are not), a multi-line statement
  counted once at its first line, docstrings left out. Like coverage.py's, the count
  follows this Python's compiler (checked against coverage.py 7.18 on Python 3.11).
  coverage.py's exclusions are not applied: ``# pragma: no cover`` lines and, in recent
  versions only, lines that are just ``...`` and ``if TYPE_CHECKING:`` blocks count here;
- covered: the statements whose lines a ``sys.settrace`` line event reaches while the
  module runs (imports, ``def`` lines, class bodies, module-level branches: what runs when
  pytest imports ``mod``, with coverage.py already measuring) and while the tests run.
  Every test runs, failing ones too, as pytest runs them all.
"""

from __future__ import annotations

import ast
import io
import tokenize
import types
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


def _multiline_map(source: str) -> dict[int, int]:
    """Every line of a statement spanning several lines, mapped to its first line (from
    the tokens: a logical line ends at its NEWLINE token), as coverage.py maps them."""
    lines: dict[int, int] = {}
    first = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NEWLINE:
            if first and tok.end[0] != first:
                lines.update((line, first) for line in range(first, tok.end[0] + 1))
            first = 0
        elif not first and tok.string.strip() and tok.type != tokenize.COMMENT:
            first = tok.start[0]
    return lines


def statement_lines(source: str) -> tuple[set[int], dict[int, int]]:
    """The statements of ``source`` as coverage.py counts them: the lines in the line
    tables of its compiled code (nested functions and classes included; code the compiler
    drops, such as ``global``, a bare annotation or lines after a ``return``, has none),
    each at the first line of its statement, docstrings left out. Also the map from the
    lines of multi-line statements to their first line."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            head = node.body[0]
            if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant) and isinstance(head.value.value, str):
                docstrings.update(range(head.lineno, (head.end_lineno or head.lineno) + 1))
    raw: set[int] = set()
    codes = [compile(source, _MODULE_FILE, "exec", dont_inherit=True, optimize=0)]
    while codes:
        code = codes.pop()
        raw.update(line for _, _, line in code.co_lines() if line)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    multiline = _multiline_map(source)
    return {multiline.get(line, line) for line in raw - docstrings}, multiline


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

    statements, multiline = statement_lines(module)
    run = executor.run(Job(program=coverage_program(module, tests), calls=[_COVER_CALL], limits=quiet(limits)))
    if run.status == "infra":
        raise RuntimeError(f"sandbox infrastructure failure while measuring coverage: {run.infra_error}")
    if not run.program_ok:
        return LineCoverage(len(statements), 0)
    seen: set[int] = set()
    call = run.calls[0] if run.calls else None
    value = call.value if call is not None and call.status == "ok" else None
    if isinstance(value, list) and len(value) == 2 and value[0] == "list":
        seen = {int(v[1]) for v in value[1] if isinstance(v, list) and len(v) == 2 and v[0] == "int"}
    covered = {multiline.get(line, line) for line in seen}
    return LineCoverage(len(statements), len(covered & statements))
