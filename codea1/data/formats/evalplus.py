"""EvalPlus JSONL (HumanEvalPlus / MbppPlus releases).

Rows: `task_id, prompt, entry_point, canonical_solution, base_input, plus_input, atol`.
EvalPlus ships *inputs* only; it gets expected outputs by running the canonical
solution. The golden program here does the same inside the one sandboxed run: it
executes the reference in a private namespace, and for every input compares the
candidate's output with the reference's, with EvalPlus's rules (float tolerance `atol`,
1e-6 for float outputs when `atol` is 0, NaN equals NaN; set equality and "not None"
tasks of MBPP+; the polynomial-root check of HumanEval/32). MbppPlus stores some
inputs as JSON that cannot hold their type (tuples, sets, complex numbers); the program
gives them back their type before any call, per task, as EvalPlus's `get_mbpp_plus`
does (`MBPP_RESTORE`). Inputs are also kept in `meta`, as stored, for callers that want
per-input calls.

Like every golden program, it runs in the candidate's process after the candidate
code: it checks correctness, it is not a defence against a candidate that tampers with
the interpreter (the sandbox is the security boundary).
"""

from __future__ import annotations

import json
import re
from typing import Any

from codea1.data.formats._code import defines, import_lines, signature, simple_asserts
from codea1.data.problem import Problem, ProblemFormatError, check_identifier, require_str

NAME = "evalplus"
DESCRIPTION = "EvalPlus JSONL (task_id, prompt, canonical_solution, base_input, plus_input, atol)"
KEYS = frozenset({"task_id", "prompt", "entry_point", "canonical_solution", "base_input"})  # what detection looks for in a first row

# EvalPlus's special output comparisons (evalplus/evaluate.py), by entry point.
MBPP_SET_EQ = (
    "similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
    "larg_nnum", "intersection_array", "find_dissimilar", "Diff",
)
MBPP_NOT_NONE = ("check_str", "text_match_three", "text_starta_endb")

# MbppPlus tasks whose stored (JSON) inputs EvalPlus turns back into tuples, sets or complex
# numbers before running anything (evalplus/data/mbpp.py), by how: see `_codea1_restore`.
MBPP_RESTORE = {
    "each-tuple": (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726,
                   740, 744, 809),
    "each-tuple-list": (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780),
    "each-tuple-tuple": (259, 401, 445),
    "first-tuple-list": (75, 413, 444, 753),
    "first-tuple": (250, 307, 405, 446, 617, 720, 763, 808),
    "second-tuple": (106, 750),
    "first-sets": (115,),
    "float-complex": (124,),
    "complex": (252,),
    "first-tuple-of-items": (278,),
    "first-dict-tuples": (722,),
    "all-tuples": (580, 615, 791),
}

_RESTORE_OF = {f"Mbpp/{n}": kind for kind, tasks in MBPP_RESTORE.items() for n in tasks}  # task id -> how

_HARNESS = '''
import copy as _codea1_copy
import json as _codea1_json
import math as _codea1_math

_CODEA1_CASES = _codea1_json.loads(__CASES__)
_CODEA1_REFERENCE = __REFERENCE__
_CODEA1_MODE = __MODE__
_CODEA1_ATOL = __ATOL__
_CODEA1_RESTORE = __RESTORE__


def _codea1_tuples(x):
    return tuple(_codea1_tuples(i) for i in x) if isinstance(x, list) else x


def _codea1_restore(inp):
    """The arguments with the types their JSON lost (`MBPP_RESTORE`)."""
    kind, t = _CODEA1_RESTORE, tuple
    if kind == "each-tuple":
        return [t(a) for a in inp]
    if kind == "each-tuple-list":
        return [[t(b) for b in a] for a in inp]
    if kind == "each-tuple-tuple":
        return [t(t(b) for b in a) for a in inp]
    if kind == "first-tuple-list":
        return [[t(b) for b in inp[0]], *inp[1:]]
    if kind == "first-tuple":
        return [t(inp[0]), *inp[1:]]
    if kind == "second-tuple":
        return [inp[0], t(inp[1]), *inp[2:]]
    if kind == "first-sets":  # (an empty member is EvalPlus's `{}`, a dict)
        return [[set(b) if isinstance(b, list) and b else {} for b in inp[0]]]
    if kind == "float-complex":
        return [float(inp[0]), complex(inp[1])]
    if kind == "complex":
        return [complex(inp[0])]
    if kind == "first-tuple-of-items":
        return [t(t(b) if isinstance(b, list) else b for b in inp[0])]
    if kind == "first-dict-tuples":
        return [{k: t(v) for k, v in inp[0].items()}, *inp[1:]]
    if kind == "all-tuples":
        return _codea1_tuples(inp)
    return inp


def _codea1_is_floats(x):
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, float) for i in x)
    return False


def _codea1_close(out, exp, atol):
    if isinstance(exp, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(exp):
            return False
        return all(_codea1_close(o, e, atol) for o, e in zip(out, exp))
    try:
        o, e = float(out), float(exp)
    except (TypeError, ValueError):
        return out == exp
    if _codea1_math.isnan(o) or _codea1_math.isnan(e):
        return _codea1_math.isnan(o) and _codea1_math.isnan(e)
    if _codea1_math.isinf(o) or _codea1_math.isinf(e):
        return o == e
    return abs(o - e) <= atol + 1e-07 * abs(e)


def _codea1_same(out, exp, inp):
    atol = _CODEA1_ATOL
    if _CODEA1_MODE == "poly-root":
        xs = inp[0]
        return abs(sum(c * out ** i for i, c in enumerate(xs))) <= atol
    if _CODEA1_MODE == "set-eq":
        out, exp = set(out), set(exp)
    elif _CODEA1_MODE == "not-none":
        out = out if isinstance(out, bool) else out is not None
        exp = exp if isinstance(exp, bool) else exp is not None
    if atol == 0 and _codea1_is_floats(exp):
        atol = 1e-6
    if out == exp:
        return True
    return atol != 0 and _codea1_close(out, exp, atol)


def _codea1_check(candidate):
    namespace = {"__name__": "_codea1_reference"}
    exec(compile(_CODEA1_REFERENCE, "<reference>", "exec"), namespace)
    reference = namespace[__ENTRY__]
    for index, inp in enumerate(_CODEA1_CASES):
        inp = _codea1_restore(inp)
        exp = reference(*_codea1_copy.deepcopy(inp))
        out = candidate(*_codea1_copy.deepcopy(inp))
        if not _codea1_same(out, exp, inp):
            raise AssertionError(
                f"input #{index} {repr(inp)[:200]}: got {repr(out)[:200]}, expected {repr(exp)[:200]}"
            )


_codea1_check(__ENTRY_NAME__)
'''


def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def _inputs(row: dict[str, Any], name: str, where: str) -> list:
    value = row.get(name)
    if value is None:
        return []
    if isinstance(value, str):  # some exports store the inputs as JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ProblemFormatError(where, name, "a list of argument lists (or its JSON text)") from None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(args, (list, tuple)) for args in value):
        raise ProblemFormatError(where, name, "a list of argument lists", value)
    return [list(args) for args in value]


def convert(row: dict[str, Any], where: str) -> Problem:
    task_id = require_str(row, "task_id", where)
    entry = require_str(row, "entry_point", where)
    check_identifier(entry, where)
    prompt = require_str(row, "prompt", where)
    solution = require_str(row, "canonical_solution", where)
    if defines(solution, entry):  # MbppPlus: a complete solution
        missing = [line for line in import_lines(prompt).splitlines() if line not in solution]
        reference = "\n".join(missing + [solution]) if missing else solution
    elif defines(prompt + solution, entry):  # HumanEvalPlus: the body of the prompt's function
        reference = prompt + solution
    else:
        raise ProblemFormatError(where, "canonical_solution", f"code defining {entry!r} (alone or after prompt)")
    if defines(prompt, entry):
        question = prompt
        tests: list[str] = []
    else:  # MbppPlus prompts are a docstring only: add the signature, like MBPP+ `problem`
        question = signature(reference, entry, where, "canonical_solution") + "\n" + prompt.strip()
        tests = simple_asserts(prompt, entry)
    base = _inputs(row, "base_input", where)
    plus = _inputs(row, "plus_input", where)
    atol = 0 if row.get("atol") is None else row["atol"]
    if not isinstance(atol, (int, float)) or isinstance(atol, bool) or not atol >= 0:
        raise ProblemFormatError(where, "atol", "a number >= 0", atol)
    mode = "plain"
    if task_id.startswith("Mbpp/") and entry in MBPP_SET_EQ:
        mode = "set-eq"
    elif task_id.startswith("Mbpp/") and entry in MBPP_NOT_NONE:
        mode = "not-none"
    elif task_id == "HumanEval/32":
        mode = "poly-root"
    restore = _RESTORE_OF.get(task_id)
    values = {
        "__CASES__": repr(json.dumps(base + plus)),
        "__REFERENCE__": repr(reference),
        "__MODE__": repr(mode),
        "__ATOL__": repr(float(atol)),
        "__RESTORE__": repr(restore),
        "__ENTRY__": repr(entry),
        "__ENTRY_NAME__": entry,
    }
    # One pass, so text inside the inputs or the reference is never substituted.
    pattern = "|".join(sorted(values, key=len, reverse=True))
    program = re.sub(pattern, lambda m: values[m.group(0)], _HARNESS)
    return Problem(
        id=task_id,
        question=question,
        entry_point=entry,
        reference=reference,
        tests=tests,
        test_program=program,
        imports=import_lines(prompt) if defines(prompt, entry) else import_lines(reference),
        source="humanevalplus" if task_id.startswith("HumanEval") else "mbppplus",
        meta={"base_input": base, "plus_input": plus, "atol": atol, "compare": mode},
    )
