"""Rows of the Code-A1 reference's parquet files (its validation and training files).

Columns: `prompt` (chat messages: the code model's prompt, kept in `meta["prompt"]`),
`problem` (signature + docstring), `description`,
`GT_code` (reference), `test`, `data_source`, `extra_info` (`question_id`,
`function_name`, and optionally `function_declaration`, `imports`); optionally
`clean_description` (the text the reference shows the test model).

The reference's validation file mixes two row shapes, both read here:
- MBPP+ rows: `GT_code` is a complete program and `test` defines `check(<function>)`;
- HumanEval+ rows: `GT_code` is the function's *body*, which completes `problem` (the
  HumanEval prompt: imports, helpers, signature, docstring), and `test` defines
  `check(candidate)`.
The golden program is `test + "check(<function_name>)"`, as the reference runs it. A
`test` without a `check` but with pytest functions (KodCode's own test style, importing
from `solution`) becomes a pytest golden program; an empty `test` gives none (the
training file's rows need only `GT_code`: generated tests are judged on it).
"""

from __future__ import annotations

import re
from typing import Any

from codea1.data.formats._code import defines, import_lines, simple_asserts
from codea1.data.formats.pytest_program import pytest_program
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_str

NAME = "codea1-rows"
DESCRIPTION = "Code-A1 reference rows (problem, GT_code, test, extra_info), parquet or JSONL"
KEYS = frozenset({"GT_code", "problem", "test", "extra_info"})  # what detection looks for in a first row


# MBPP/56's function is itself called `check`: the harness's `def check(candidate)` would
# replace it and then call itself. Renaming the harness function keeps `check(...)` calls
# in its body pointing at the candidate.
_HARNESS_CHECK = "_codea1_harness_check"


def _rename_harness_check(test: str, where: str) -> str:
    pattern = re.compile(r"^def check\(", re.MULTILINE)
    if len(pattern.findall(test)) != 1:
        raise ProblemFormatError(where, "test", "a program with one top-level `def check(...)`")
    return pattern.sub(f"def {_HARNESS_CHECK}(", test)


_CHECK_DEF = re.compile(r"^def check\((\w*)", re.MULTILINE)


def _tested_function(test: str, declared: str) -> str:
    """The function the check program really calls.

    A few MBPP+ rows (MBPP/6, /123, /301, ...) name a helper in `function_name` while
    their `check` asserts on another function of the reference: that one is the entry
    point the model must write and the tests must call. A call of check's own parameter
    (HumanEval+'s `candidate`, MBPP+'s function name) is a call of the declared function.
    """
    called = set(re.findall(r"assertion\((\w+)\(", test))
    parameter = _CHECK_DEF.search(test)
    if parameter is not None:
        called.discard(parameter.group(1))
    return called.pop() if len(called) == 1 else declared


def _complete_reference(question: str, gt_code: str, entry: str, where: str) -> str:
    """`GT_code` itself when it defines the entry point, else `problem + GT_code`.

    HumanEval+ rows hold the canonical solution as a function body that continues the
    prompt, the way EvalPlus builds its ground truth (prompt + canonical_solution).
    """
    if defines(gt_code, entry):
        return gt_code
    joined = (question if question.endswith("\n") else question + "\n") + gt_code
    if defines(joined, entry):
        return joined
    raise ProblemFormatError(
        where, "GT_code",
        f"code that defines function {entry!r}, or a function body that completes 'problem' into it",
    )


def _golden_program(test: str, entry: str, where: str) -> str | None:
    """The program run after a candidate: `test` plus the call of its `check` (see the docstring)."""
    if _CHECK_DEF.search(test) is not None:
        harness = "check"
        if entry == "check":
            test, harness = _rename_harness_check(test, where), _HARNESS_CHECK
        return f"{test.rstrip()}\n\n{harness}({entry})\n"
    if not test.strip():
        return None
    return pytest_program(test, where)


def _chat_prompt(value: Any, where: str) -> list[dict[str, str]] | None:
    """The row's `prompt` column as chat messages, or None when the row has none."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                       for m in value)):
        raise ProblemFormatError(where, "prompt", "a list of chat messages, each with string role and content", value)
    return [{"role": m["role"], "content": m["content"]} for m in value]


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def convert(row: dict[str, Any], where: str) -> Problem:
    info = row.get("extra_info")
    if not isinstance(info, dict):
        raise ProblemFormatError(where, "extra_info", "an object with question_id and function_name", info)
    entry = require_str(info, "function_name", where + ", extra_info")
    check_identifier(entry, where, "extra_info.function_name")
    test = require_str(row, "test", where, allow_empty=True)
    entry = _tested_function(test, entry)
    pid = require_str(info, "question_id", where + ", extra_info")
    question = require_str(row, "problem", where)
    reference = _complete_reference(question, require_str(row, "GT_code", where), entry, where)
    imports = info.get("imports") or ""
    if not isinstance(imports, str):
        raise ProblemFormatError(where, "extra_info.imports", "a string", imports)
    # The reference must be complete code: add the question's imports it lacks.
    missing = [line for line in imports.splitlines() if line.strip() and line.strip() not in reference]
    if missing:
        reference = "\n".join(missing) + "\n" + reference
    description = "" if row.get("description") is None else require_str(row, "description", where, allow_empty=True)
    meta: dict[str, Any] = {
        "description": description,
        "function_declaration": info.get("function_declaration", ""),
    }
    clean = row.get("clean_description")
    if isinstance(clean, str) and clean.strip():
        meta["clean_description"] = clean
    prompt = _chat_prompt(row.get("prompt"), where)
    if prompt is not None:
        meta["prompt"] = prompt  # the code model's prompt, as the reference uses it
    return Problem(
        id=pid,
        question=question,
        entry_point=entry,
        reference=reference,
        tests=simple_asserts(description or question, entry),
        test_program=_golden_program(test, entry, where),
        imports=imports or import_lines(reference),
        source=str(row.get("data_source") or NAME),
        meta=meta,
    )
