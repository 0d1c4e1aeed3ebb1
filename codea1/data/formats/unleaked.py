"""UnLeakedTestBench JSON: an array of `task_id, func_name, code, prompt, test_list`.

`code` is the reference function, `prompt` its description, `test_list` five golden
assert strings. The question is the reference's signature with the description as
docstring.
"""

from __future__ import annotations

from typing import Any

from codea1.data.formats._code import docstring_question, import_lines, signature
from codea1.data.problem import Problem, check_identifier, require_id, require_str, require_str_list

NAME = "unleaked"
DESCRIPTION = "UnLeakedTestBench JSON (task_id, func_name, code, prompt, test_list)"
KEYS = frozenset({"func_name", "code", "test_list"})  # what detection looks for in a first row


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def convert(row: dict[str, Any], where: str) -> Problem:
    entry = require_str(row, "func_name", where)
    check_identifier(entry, where, "func_name")
    code = require_str(row, "code", where)
    description = require_str(row, "prompt", where, allow_empty=True)
    return Problem(
        id=require_id(row, "task_id", where),
        question=docstring_question(signature(code, entry, where, "code"), description),
        entry_point=entry,
        reference=code,
        tests=require_str_list(row, "test_list", where),
        test_program=None,
        imports=import_lines(code),
        source="unleakedtestbench",
        meta={"description": description},
    )
