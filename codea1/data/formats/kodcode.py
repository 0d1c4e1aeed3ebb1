"""KodCode-V1 rows (parquet or JSONL): `question_id, question, solution, test, test_info`.

`test` is pytest code importing from `solution`; it becomes a golden test program (see
`pytest_program`). `test_info` lists the functions the tests call; the first is the
entry point, and the question is its declaration with KodCode's question text as the
docstring (MBPP+ `problem` style).
"""

from __future__ import annotations

from typing import Any

from codea1.data.formats._code import docstring_question, import_lines, signature
from codea1.data.formats.pytest_program import pytest_program
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_id, require_str

NAME = "kodcode"
DESCRIPTION = "KodCode-V1 rows (question_id, question, solution, test, test_info), parquet or JSONL"
KEYS = frozenset({"question", "solution", "test", "test_info"})  # what detection looks for in a first row


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def _test_info(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    info = row.get("test_info")
    if hasattr(info, "tolist"):
        info = info.tolist()
    if not isinstance(info, (list, tuple)) or not info or not all(isinstance(i, dict) for i in info):
        raise ProblemFormatError(where, "test_info", "a non-empty list of {function_name, function_declaration, ...}", info)
    return list(info)


def convert(row: dict[str, Any], where: str) -> Problem:
    info = _test_info(row, where)
    entry = require_str(info[0], "function_name", where + ", test_info[0]")
    check_identifier(entry, where, "test_info[0].function_name")
    text = require_str(row, "question", where)
    solution = require_str(row, "solution", where)
    declarations = []
    for k, item in enumerate(info):
        declaration = item.get("function_declaration")
        if declaration is not None and not isinstance(declaration, str):
            raise ProblemFormatError(where, f"test_info[{k}].function_declaration", "a string (a def line)",
                                     declaration)
        declarations.append((declaration or "").strip())
    first = declarations[0] or signature(solution, entry, where, "solution")
    others = [d for d in declarations[1:] if d]
    if others:
        text = text.rstrip() + "\n\nAlso define:\n" + "\n".join(others)
    difficulty = row.get("gpt_difficulty")
    meta: dict[str, Any] = {"test_info": info}
    for key in ("gpt_difficulty", "subset", "style", "version"):
        if row.get(key) is not None:
            meta[key] = row[key]
    if difficulty is not None:
        meta["difficulty"] = difficulty
    return Problem(
        id=require_id(row, "question_id", where),
        question=docstring_question(first if first.endswith(":") else first + ":", text),
        entry_point=entry,
        reference=solution,
        tests=[],
        test_program=pytest_program(require_str(row, "test", where), where),
        imports=import_lines(solution),
        source="kodcode",
        meta=meta,
    )
