"""OpenAI `human-eval` JSONL(.gz): `task_id, prompt, entry_point, canonical_solution, test`.

`prompt` is the signature and docstring; `canonical_solution` is the function body, so
the reference is `prompt + canonical_solution`. The golden program is `test +
check(entry_point)` (human-eval's `check(candidate)` convention).
"""

from __future__ import annotations

from typing import Any

from codea1.data.formats._code import defines, import_lines
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_str

NAME = "human-eval"
DESCRIPTION = "OpenAI human-eval JSONL(.gz) (task_id, prompt, canonical_solution, test, entry_point)"
KEYS = frozenset({"task_id", "prompt", "entry_point", "canonical_solution", "test"})  # what detection looks for in a first row


def matches(row: dict[str, Any]) -> bool:
    keys = row.keys()
    return KEYS <= keys and (
        "base_input" not in keys and "complete_prompt" not in keys
    )


def convert(row: dict[str, Any], where: str) -> Problem:
    entry = require_str(row, "entry_point", where)
    check_identifier(entry, where)
    prompt = require_str(row, "prompt", where)
    solution = require_str(row, "canonical_solution", where)
    reference = prompt + solution
    if not defines(reference, entry):
        raise ProblemFormatError(
            where, "canonical_solution", f"a body that completes prompt into a definition of {entry!r}"
        )
    test = require_str(row, "test", where)
    return Problem(
        id=require_str(row, "task_id", where),
        question=prompt,
        entry_point=entry,
        reference=reference,
        tests=[],
        test_program=f"{test.rstrip()}\n\ncheck({entry})\n",
        imports=import_lines(prompt),
        source="humaneval",
        meta={},
    )
