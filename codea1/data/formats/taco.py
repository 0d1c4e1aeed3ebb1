"""TACO and APPS rows (parquet or JSON/JSONL): `question`, `solutions` (JSON text: a list
of Python programs), `input_output` (JSON text: `{"inputs": [...], "outputs": [...]}`,
with `fn_name` for the call-based half), `starter_code`.

Standard-input rows (no `fn_name`) become stdin problems: each input and output is a
string or a list of lines. Call-based rows map onto the function-level path: each input
is the argument list and each output the return value, as `assert fn(ARGS) == VALUE`
golden tests, or `assert Solution().fn(ARGS) == VALUE` when the starter code is a LeetCode
`class Solution` (the entry point is then `Solution`), compared as APPS's harness compares:
a returned tuple as a list, and an output that is a list of one by the value in it or
the list itself (`call_assert`; APPS's rule for a list of tuples is not reproduced). The question shows the starter code.
A call-based problem assumes the imports APPS's and TACO's harnesses run before the
program (`HARNESS_IMPORTS`: LeetCode code uses `List[int]` or `Counter` unimported): they
are its `imports`, and the reference gets those it lacks.
The first solution is the reference (`codea1 data check` says when it fails its tests); a
row with none loads with an empty reference and `meta.no_reference` (evaluation only).
`meta`: `difficulty`, `time_limit_s` (TACO's `time_limit`, e.g. "2 seconds"), `url`, and
`float_tolerance` for a standard-input problem whose golden outputs hold a non-integer
number (`_stdin.prints_decimals`).

Output comparison of standard-input problems. APPS's harness (`eval/testing_util.py`,
github.com/hendrycks/apps) reads the program's output as a list of lines and accepts, after
its exact and whitespace-stripped comparisons, outputs whose lines are each one number
within `np.allclose` (rtol 1e-5, atol 1e-8) of the expected lines, or whose numbers agree
rounded to 3 decimals (per line, as sets). TACO's harness (`metrics/testing_util.py`,
github.com/FlagOpen/TACO) is APPS's: its first release (December 2023) compared as
above; since June 2024 it hands the comparison the output as one string, whose float
branches then iterate characters and never fire, so it is exact in practice (`1.5` fails
`1.500000` there). The loader follows the comparison both were written to make: a problem
that prints non-integer numbers gets `float_tolerance` 1e-5, which is `np.allclose`'s
bound for values of 1 and more, and 1e-5 absolutely below 1 (looser than `allclose`, stricter
than the 3-decimal rounding). A problem whose outputs are integers only keeps exact tokens:
the rounding rule is exact on integers and the project's relative tolerance would pass a
wrong integer (off by one from 10**5 up); APPS's `allclose` on one-number lines would too
(not reproduced, nor its acceptance of `5.0` for `5` and its order-blind set comparisons).
To reproduce TACO's current harness instead, drop the tolerance for `taco/` rows.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from codea1.data.formats._stdin import (as_text, call_assert, call_target, io_tests, json_column, prints_decimals,
                                        starter_code)
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_id, require_str

NAME = "taco"
DESCRIPTION = "TACO / APPS rows (question, solutions, input_output, starter_code), parquet or JSON"
KEYS = frozenset({"question", "solutions", "input_output"})  # what detection looks for in a first row

# What APPS's and TACO's harnesses (`testing_util`) import before a call-based program,
# except their `import numpy as np` (a heavy import in every run, for code that rarely
# uses it unimported).
HARNESS_IMPORTS = "\n".join([
    "import sys", "import time", "import itertools",
    "from itertools import accumulate, product, permutations, combinations",
    "import collections", "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap",
    "from functools import lru_cache", "import math",
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2",
    "import fractions", "from typing import List, Tuple", "import random", "import heapq", "from heapq import *",
])
#: `meta.float_tolerance` of a standard-input problem that prints non-integer numbers
#: (`np.allclose`'s relative 1e-5 in APPS's harness).
FLOAT_TOLERANCE = 1e-5


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def _id(row: dict[str, Any], question: str, where: str) -> str:
    if row.get("problem_id") is not None:
        return f"apps/{require_id(row, 'problem_id', where)}"
    for key in ("url", "name"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return f"taco/{value.strip()}"
    return "taco/" + hashlib.sha256(question.encode()).hexdigest()[:12]


#: TACO's `time_limit` text: "2 seconds", "1.5 sec", "500 ms" (milliseconds when so marked)
_TIME = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(?:(ms|msec|millisecond|milliseconds)|s|sec|secs|second|seconds)?\b",
                   re.IGNORECASE)


def _time_limit(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = _TIME.match(value or "") if isinstance(value, str) else None
    if m is None or float(m.group(1)) <= 0:
        return None
    return float(m.group(1)) / (1000.0 if m.group(2) else 1.0)


def _call_tests(io: dict[str, Any], target: str, where: str) -> list[str]:
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise ProblemFormatError(where, "input_output", "lists `inputs` and `outputs` of one length", io)
    tests = []
    for k, (args, value) in enumerate(zip(inputs, outputs)):
        if not isinstance(args, list):
            raise ProblemFormatError(where, f"input_output.inputs[{k}]", "the list of arguments", args)
        wrapped = isinstance(value, list) and len(value) == 1
        tests.append(call_assert(target, args, value[0] if wrapped else value, where, f"input_output.outputs[{k}]",
                                 tuples_as_lists=True, wrapped_too=wrapped))
    return tests


def convert(row: dict[str, Any], where: str) -> Problem:
    question = require_str(row, "question", where)
    io = json_column(row, "input_output", where)
    if not isinstance(io, dict):
        raise ProblemFormatError(where, "input_output", 'a JSON object {"inputs": [...], "outputs": [...]}', io)
    solutions = json_column(row, "solutions", where, default=[])
    if not isinstance(solutions, list) or not all(isinstance(s, str) for s in solutions):
        raise ProblemFormatError(where, "solutions", "a JSON list of programs", solutions)
    reference = solutions[0] if solutions else ""
    meta: dict[str, Any] = {} if reference else {"no_reference": True}
    limit = _time_limit(row.get("time_limit"))
    if limit is not None:
        meta["time_limit_s"] = limit
    for key in ("difficulty", "url"):
        if isinstance(row.get(key), (str, int)):
            meta[key] = row[key]
    starter = starter_code(row, where)
    pid = _id(row, question, where)
    source = "apps" if pid.startswith("apps/") else "taco"
    fn = io.get("fn_name")
    if fn is None:
        tests = io_tests(io.get("inputs"), io.get("outputs"), where, "input_output")
        outputs = [as_text(o, where, f"input_output.outputs[{k}]") for k, o in enumerate(io["outputs"])]
        if prints_decimals(outputs):
            meta["float_tolerance"] = FLOAT_TOLERANCE
        return Problem(id=pid, question=question, entry_point="", reference=reference, tests=tests, source=source,
                       meta=meta, kind="stdin")
    if not isinstance(fn, str):
        raise ProblemFormatError(where, "input_output.fn_name", "a function name", fn)
    check_identifier(fn, where, "input_output.fn_name")
    entry, target = call_target(starter, fn)
    shown = question.rstrip() + ("\n\n" + starter.strip() if starter.strip() else "")
    if reference:  # complete code, as the project's references are: the assumed imports it lacks
        missing = [line for line in HARNESS_IMPORTS.splitlines() if line not in reference]
        reference = "\n".join(missing + [reference]) if missing else reference
    return Problem(id=pid, question=shown, entry_point=entry, reference=reference,
                   tests=_call_tests(io, target, where), imports=HARNESS_IMPORTS, source=source, meta=meta)
