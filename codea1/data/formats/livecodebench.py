"""LiveCodeBench code-generation rows (`code_generation_lite`, JSONL or parquet):
`question_id`, `question_title`, `question_content`, `platform`, `starter_code`,
`public_test_cases` (JSON text: `[{"input", "output", "testtype"}]`), `private_test_cases`
(the same, or base64 of zlib of a pickled JSON string: read with an unpickler that refuses
every class), `metadata` (JSON text; `func_name` for functional problems), `difficulty`,
`contest_date`.

`testtype` "stdin" rows become stdin problems; "functional" rows (LeetCode) map onto the
function-level path: each input is its arguments as JSON, one a line, and each output the
JSON value, as `assert Solution().FUNC(ARGS) == VALUE` golden tests (entry point
`Solution`; a returned tuple compares as a list, as LiveCodeBench's harness compares). Every program runs after the imports LiveCodeBench's harness runs first
(`HARNESS_IMPORTS`: LeetCode code keeps the starter's `List[int]` unimported): they are
the problem's `imports`. LiveCodeBench ships no solutions: every problem has an empty reference and
`meta.no_reference`, for `codea1 eval code`, not for training. Public tests come first
(`meta.test_counts`).

Output comparison of stdin problems: exact tokens (no `meta.float_tolerance`), on purpose.
LiveCodeBench's harness (`lcb_runner/evaluation/testing_util.py`, `grade_stdio`;
github.com/LiveCodeBench/LiveCodeBench) compares the stripped output line by line: a line
passes when it equals the expected one, or when both lines split into numbers that are
equal as `decimal.Decimal` values, with no tolerance (its comment: floats would call
50000000000000000 and 50000000000000001 equal). Exact tokens match that, except for one
value written two ways (`1.5` and `1.50`, `5` and `5.0`), which Decimal accepts and exact
tokens do not; any float tolerance would instead pass the wrong large integers the Decimal
comparison is there to reject, and wrong decimals within it. (Its line structure is not
reproduced: tokens are compared across line breaks.)
"""

from __future__ import annotations

import json
from typing import Any

from codea1.data.formats._stdin import call_assert, call_target, compressed_json, json_column, starter_code
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_id, require_str
from codea1.data.stdin_io import io_test

NAME = "livecodebench"
DESCRIPTION = "LiveCodeBench code generation rows (question_content, public/private_test_cases, metadata)"
KEYS = frozenset({"question_id", "question_content", "public_test_cases", "private_test_cases"})

# The import lines of LiveCodeBench's `testing_util.import_string`, in its order (its
# `from builtins import *` undoes what the star imports before it shadow, `compile`,
# `open`, `pow`, ...); its `sys.setrecursionlimit(50000)` is not an import and is left out.
_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
            "itertools", "functools", "operator", "io", "sys", "json")
HARNESS_IMPORTS = "\n".join([f"from {m} import *" for m in _MODULES + ("builtins", "typing")]
                             + [f"import {m}" for m in _MODULES])


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def _cases(row: dict[str, Any], field: str, where: str) -> list[dict[str, Any]]:
    value = row.get(field)
    if value is None or value == "":
        return []
    cases = compressed_json(value, where, field) if isinstance(value, str) else value
    if not isinstance(cases, list):
        raise ProblemFormatError(where, field, "a list of test cases", cases)
    for k, case in enumerate(cases):
        if (not isinstance(case, dict) or not isinstance(case.get("input"), str)
                or not isinstance(case.get("output"), str) or case.get("testtype") not in ("stdin", "functional")):
            raise ProblemFormatError(where, f"{field}[{k}]",
                                     '{"input": str, "output": str, "testtype": "stdin" | "functional"}', case)
    return cases


def _functional(case: dict[str, Any], target: str, where: str, field: str) -> str:
    try:
        args = [json.loads(line) for line in case["input"].split("\n") if line.strip()]
        value = json.loads(case["output"])
    except ValueError as err:
        raise ProblemFormatError(where, field, f"JSON arguments, one a line, and a JSON output ({err})",
                                 case) from None
    return call_assert(target, args, value, where, field, tuples_as_lists=True)


def convert(row: dict[str, Any], where: str) -> Problem:
    qid = require_id(row, "question_id", where)
    content = require_str(row, "question_content", where)
    public, private = _cases(row, "public_test_cases", where), _cases(row, "private_test_cases", where)
    cases = public + private
    kinds = {c["testtype"] for c in cases}
    if len(kinds) > 1:
        raise ProblemFormatError(where, "public_test_cases", "test cases of one testtype", sorted(kinds))
    meta: dict[str, Any] = {"no_reference": True, "test_counts": {"public": len(public), "private": len(private)}}
    for key in ("platform", "difficulty", "contest_date", "question_title"):
        if isinstance(row.get(key), str):
            meta[key] = row[key]
    starter = starter_code(row, where)
    if kinds != {"functional"}:
        return Problem(id=f"livecodebench/{qid}", question=content, entry_point="", reference="",
                       tests=[io_test(c["input"], c["output"]) for c in cases], imports=HARNESS_IMPORTS,
                       source="livecodebench", meta=meta, kind="stdin")
    info = json_column(row, "metadata", where, default={})
    fn = info.get("func_name") if isinstance(info, dict) else None
    if not isinstance(fn, str):
        raise ProblemFormatError(where, "metadata", 'JSON with "func_name" for a functional problem', info)
    check_identifier(fn, where, "metadata.func_name")
    entry, target = call_target(starter, fn)
    tests = [_functional(c, target, where, f"test case {k}") for k, c in enumerate(cases)]
    shown = content.rstrip() + ("\n\n" + starter.strip() if starter.strip() else "")
    return Problem(id=f"livecodebench/{qid}", question=shown, entry_point=entry, reference="", tests=tests,
                   imports=HARNESS_IMPORTS, source="livecodebench", meta=meta)
