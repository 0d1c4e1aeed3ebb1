"""Rows of the Code-A1 reference's parquet files (e.g. `mbppplus.parquet`).

Columns: `prompt` (chat messages), `problem` (signature + docstring), `description`,
`GT_code` (reference), `test` (a program defining `check(fn)`), `data_source`,
`extra_info` (`question_id`, `function_name`, `function_declaration`, `imports`).
The golden program is `test + "check(<function_name>)"`, as the reference runs it.
"""

from __future__ import annotations

import re
from typing import Any

from codea1.data.formats._code import import_lines, simple_asserts
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_str

NAME = "codea1-rows"
DESCRIPTION = "Code-A1 reference rows (problem, GT_code, test, extra_info), parquet or JSONL"


# MBPP/56's function is itself called `check`: the harness's `def check(candidate)` would
# replace it and then call itself. Renaming the harness function keeps `check(...)` calls
# in its body pointing at the candidate.
_HARNESS_CHECK = "_codea1_harness_check"


def _rename_harness_check(test: str, where: str) -> str:
    pattern = re.compile(r"^def check\(", re.MULTILINE)
    if len(pattern.findall(test)) != 1:
        raise ProblemFormatError(where, "test", "a program with one top-level `def check(...)`")
    return pattern.sub(f"def {_HARNESS_CHECK}(", test)


def _tested_function(test: str, declared: str) -> str:
    """The function the check program really calls.

    A few MBPP+ rows (MBPP/6, /123, /301, ...) name a helper in `function_name` while
    their `check` asserts on another function of the reference: that one is the entry
    point the model must write and the tests must call.
    """
    called = set(re.findall(r"assertion\((\w+)\(", test))
    return called.pop() if len(called) == 1 else declared


def matches(row: dict[str, Any]) -> bool:
    return {"GT_code", "problem", "test", "extra_info"} <= row.keys()


def convert(row: dict[str, Any], where: str) -> Problem:
    info = row.get("extra_info")
    if not isinstance(info, dict):
        raise ProblemFormatError(where, "extra_info", "an object with question_id and function_name", info)
    entry = require_str(info, "function_name", where + ", extra_info")
    check_identifier(entry, where, "extra_info.function_name")
    test = require_str(row, "test", where)
    entry = _tested_function(test, entry)
    pid = require_str(info, "question_id", where + ", extra_info")
    question = require_str(row, "problem", where)
    reference = require_str(row, "GT_code", where)
    imports = info.get("imports") or ""
    if not isinstance(imports, str):
        raise ProblemFormatError(where, "extra_info.imports", "a string", imports)
    # The reference must be complete code: add the question's imports it lacks.
    missing = [line for line in imports.splitlines() if line.strip() and line.strip() not in reference]
    if missing:
        reference = "\n".join(missing) + "\n" + reference
    description = row.get("description") or ""
    if entry == "check":
        test = _rename_harness_check(test, where)
    meta: dict[str, Any] = {
        "description": description,
        "function_declaration": info.get("function_declaration", ""),
    }
    return Problem(
        id=pid,
        question=question,
        entry_point=entry,
        reference=reference,
        tests=simple_asserts(description or question, entry),
        test_program=f"{test.rstrip()}\n\n{_HARNESS_CHECK if entry == 'check' else 'check'}({entry})\n",
        imports=imports or import_lines(reference),
        source=str(row.get("data_source") or NAME),
        meta=meta,
    )
