"""The project's own JSONL: one `Problem.to_dict()` object per line."""

from __future__ import annotations

from typing import Any

from codea1.data.problem import Problem

NAME = "project"
DESCRIPTION = "the project's JSONL (id, question, entry_point, reference, tests, test_program, ...)"


def matches(row: dict[str, Any]) -> bool:
    return {"id", "question", "entry_point", "reference"} <= row.keys()


def convert(row: dict[str, Any], where: str) -> Problem:
    return Problem.from_dict(row, where)
