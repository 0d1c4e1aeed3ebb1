"""The project's own JSONL: one `Problem.to_dict()` object per line."""

from __future__ import annotations

from typing import Any

from codea1.data.problem import Problem

NAME = "project"
DESCRIPTION = "the project's JSONL (id, question, entry_point, reference, tests, test_program, ...)"
KEYS = frozenset({"id", "question", "entry_point", "reference"})  # what detection looks for in a first row


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def convert(row: dict[str, Any], where: str) -> Problem:
    return Problem.from_dict(row, where)
