"""Shared pieces of the contest-data loaders (CodeContests, TACO/APPS, LiveCodeBench):
reading their JSON-in-a-string columns, test lists, and call-based tests as asserts."""

from __future__ import annotations

import base64
import io
import json
import math
import pickle
import re
import zlib
from collections.abc import Iterable
from typing import Any

from codea1.data.problem import ProblemFormatError
from codea1.data.stdin_io import io_test


def json_column(row: dict[str, Any], name: str, where: str, default: Any = None) -> Any:
    """A column that holds JSON text (or the parsed value already), parsed."""
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is not None:
            return default
        raise ProblemFormatError(where, name, "JSON text (the field is missing or empty)")
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except ValueError as err:
            raise ProblemFormatError(where, name, f"JSON text ({err})", value) from None
    return value.tolist() if hasattr(value, "tolist") else value


class _StrOnly(pickle.Unpickler):
    """An unpickler that builds plain data only: a pickle naming any class or function is
    refused (a pickled payload could otherwise run code while it loads)."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}")


def compressed_json(text: str, where: str, field: str) -> Any:
    """LiveCodeBench's private tests: JSON, or base64 of zlib of a pickled JSON string
    (read with an unpickler that refuses every class: plain strings only)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        inner = _StrOnly(io.BytesIO(zlib.decompress(base64.b64decode(text.encode("ascii"))))).load()
        return json.loads(inner)
    except Exception as err:  # noqa: BLE001 - every way it can be malformed is one error
        raise ProblemFormatError(where, field, f"JSON, or base64(zlib(pickle(JSON text))) ({err})",
                                 text[:60]) from None


def as_text(value: Any, where: str, field: str) -> str:
    """A test's input or output: a string, or a list of lines (APPS/TACO write both)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value and not value[-1].endswith("\n") else "")
    raise ProblemFormatError(where, field, "a string or a list of lines", value)


def io_tests(inputs: Any, outputs: Any, where: str, field: str) -> list[str]:
    """Canonical stdin tests from parallel input/output lists."""
    for part, value in (("inputs", inputs), ("outputs", outputs)):
        if not isinstance(value, (list, tuple)):  # (a string would be read as its characters)
            raise ProblemFormatError(where, f"{field}.{part}", "a list of tests (strings or lists of lines)", value)
    if len(inputs) != len(outputs):
        raise ProblemFormatError(where, field, f"as many outputs as inputs ({len(inputs)})", len(outputs))
    return [io_test(as_text(i, where, f"{field}.inputs[{k}]"), as_text(o, where, f"{field}.outputs[{k}]"))
            for k, (i, o) in enumerate(zip(inputs, outputs))]


def literal(value: Any, where: str, field: str) -> str:
    """A JSON value as a Python literal (`true` -> `True`, `null` -> `None`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v, where, field) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k, where, field)}: {literal(v, where, field)}" for k, v in value.items()) + "}"
    raise ProblemFormatError(where, field, "JSON values", value)


def call_assert(target: str, args: list[Any], expected: Any, where: str, field: str, *,
                tuples_as_lists: bool = False, wrapped_too: bool = False) -> str:
    """`assert TARGET(ARGS) == EXPECTED` from JSON arguments and value.

    `tuples_as_lists` (the APPS, TACO and LiveCodeBench harnesses: JSON has no tuples, so
    they compare a returned tuple as a list): a returned tuple compares as the list of its
    items. `wrapped_too` (APPS and TACO, whose outputs wrap the value in a list of one,
    and whose harness accepts the value alone or so wrapped): EXPECTED in a list of one
    passes as well. A test compares without the conversion wherever it cannot matter.
    """
    shown = ", ".join(literal(a, where, field) for a in args)
    call, value = f"{target}({shown})", literal(expected, where, field)
    if tuples_as_lists and isinstance(expected, list):
        call = f"(list({_RAW}) if isinstance({_RAW} := {call}, tuple) else {_RAW})"
    if wrapped_too:
        return f"assert ({_GOT} := {call}) == {value} or {_GOT} == [{value}]"
    return f"assert {call} == {value}"


# The names a golden test binds while it compares: it runs among the candidate's globals,
# so they must not be names a program would use.
_RAW, _GOT = "_codea1_returned", "_codea1_got"


def starter_code(row: dict[str, Any], where: str) -> str:
    """The row's `starter_code` (TACO, APPS, LiveCodeBench): a string, "" when absent."""
    value = row.get("starter_code")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProblemFormatError(where, "starter_code", "a string (the code an answer starts from)", value)
    return value


def call_target(starter: str, fn: str) -> tuple[str, str]:
    """(entry point, what a test calls) for a call-based problem: `Solution().fn` when the
    starter code is a LeetCode `class Solution`, else the function itself."""
    if "class Solution" in starter:
        return "Solution", f"Solution().{fn}"
    return fn, fn


# a whitespace-separated token that is a number written with a point or an exponent
_DECIMAL = re.compile(r"(?<!\S)[+-]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?(?!\S)")


def prints_decimals(outputs: Iterable[str]) -> bool:
    """Whether any of the golden `outputs` holds a number that is not written as an integer
    (`1.5`, `2.`, `.5`, `1e-9`): a problem whose answers are real numbers. The contest
    loaders give those problems the float tolerance their dataset's harness applies."""
    return any(_DECIMAL.search(text) is not None for text in outputs)
