"""BigCodeBench JSONL: `task_id, complete_prompt, canonical_solution, code_prompt, test,
entry_point, libs, ...`.

`complete_prompt` (imports, signature, docstring) is the question; `canonical_solution`
is the body, so the reference is `code_prompt` (or `complete_prompt`) plus it. `test`
is unittest code; the golden program runs every TestCase it defines and raises when one
fails. `libs` (third-party libraries a task needs) is kept in `meta`.
"""

from __future__ import annotations

import ast
from typing import Any

from codea1.data.formats._code import defines, import_lines, literal_list, parse
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_str

NAME = "bigcodebench"
DESCRIPTION = "BigCodeBench JSONL (complete_prompt, canonical_solution, test, entry_point, libs)"
KEYS = frozenset({"complete_prompt", "canonical_solution", "test", "entry_point"})  # what detection looks for in a first row

# Runs after the test code: every unittest.TestCase class the *test code* defined
# (names fixed at load time, so a candidate cannot add or hide classes by name).
_RUNNER = '''
def _codea1_run_unittests(names):
    import unittest as _unittest
    _suite = _unittest.TestSuite()
    _loader = _unittest.TestLoader()
    for _name in names:
        _suite.addTests(_loader.loadTestsFromTestCase(globals()[_name]))
    _result = _unittest.TestResult()
    _suite.run(_result)
    _bad = _result.failures + _result.errors
    if _bad or _result.testsRun == 0:
        _first = _bad[0][1].strip().splitlines()[-1] if _bad else "no test ran"
        raise AssertionError(
            f"{len(_bad)} of {_result.testsRun} unittest cases failed; first: {_first}"
        )


_codea1_run_unittests(__NAMES__)
'''


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def testcase_names(test: str, where: str) -> list[str]:
    """Names of the unittest.TestCase classes the test code defines, in order."""
    tree = parse(test, where, "test")
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
            "TestCase" in ast.unparse(base) for base in node.bases
        ):
            names.append(node.name)
    if not names:
        raise ProblemFormatError(where, "test", "unittest code defining at least one TestCase class")
    return names


def convert(row: dict[str, Any], where: str) -> Problem:
    entry = require_str(row, "entry_point", where)
    check_identifier(entry, where)
    question = require_str(row, "complete_prompt", where)
    body = require_str(row, "canonical_solution", where)
    code_prompt = row.get("code_prompt")
    head = code_prompt if isinstance(code_prompt, str) and code_prompt.strip() else question
    reference = head + body
    if not defines(reference, entry):
        reference = question + body
    if not defines(reference, entry):
        raise ProblemFormatError(
            where, "canonical_solution", f"a body that completes code_prompt into {entry!r}"
        )
    test = require_str(row, "test", where)
    program = test.rstrip() + "\n" + _RUNNER.replace("__NAMES__", repr(testcase_names(test, where)))
    meta: dict[str, Any] = {"libs": literal_list(row.get("libs"), where, "libs")}
    if isinstance(row.get("instruct_prompt"), str):
        meta["instruct_prompt"] = row["instruct_prompt"]
    return Problem(
        id=require_str(row, "task_id", where),
        question=question,
        entry_point=entry,
        reference=reference,
        tests=[],
        test_program=program,
        imports=import_lines(head),
        source="bigcodebench",
        meta=meta,
    )
