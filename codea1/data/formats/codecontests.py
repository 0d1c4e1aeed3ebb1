"""CodeContests rows (DeepMind's `code_contests`, parquet or JSON/JSONL): standard-input
problems.

Columns read: `name`, `description` (the question), `public_tests`, `private_tests`,
`generated_tests` (each `{"input": [...], "output": [...]}`; all three become the golden
tests, in that order, `meta.test_counts` says how many of each), `solutions`
(`{"language": [...], "solution": [...]}`: the first Python 3 solution, language 3 or
"PYTHON3", is the reference; a row without one loads with an empty reference and
`meta.no_reference`: it can be evaluated, not trained on), `time_limit`
(`{"seconds", "nanos"}` -> `meta.time_limit_s`), `memory_limit_bytes`, and `difficulty`,
`source`, `cf_rating` into `meta`.

Output comparison (`meta.float_tolerance`). The dataset's own harness, DeepMind's
`execution/tester_sandboxer.cc` (`OutputsMatch`, `ValuesMatch`; github.com/google-deepmind/
code_contests), splits both outputs on whitespace, lowercases them, and compares token by
token: two tokens that both parse as numbers match when they differ by less than 1e-5
(absolutely: every number parses as a double there, so its integer branch is never
reached), any other pair only when equal. (The official per-problem checkers of the
contests are not in the dataset.) The project's rule (`stdin_io.outputs_match`) allows a
difference of `tolerance * max(1, |expected|)`: absolute up to 1, relative above. So a problem whose
golden outputs hold a non-integer number (`1.5`, `2.`, `1e-9`: `prints_decimals`) gets
`float_tolerance` 1e-5: the harness's bound for values up to 1, and above it the
"absolute or relative error" rule of the contests' own float checkers. A problem whose
outputs are integers only keeps exact tokens: there the harness is exact (integers below
2**53 differ by 1 or more), and a relative tolerance would pass a wrong integer (off by
one from 10**5 up). Not reproduced: the harness's lowercasing (`YES` for `yes`) and its
acceptance of `5.0` for `5`.
"""

from __future__ import annotations

from typing import Any

from codea1.data.formats._stdin import as_text, io_tests, prints_decimals
from codea1.data.problem import Problem, ProblemFormatError, require_str

NAME = "codecontests"
DESCRIPTION = "CodeContests rows (name, description, public/private/generated_tests, solutions), parquet or JSON"
KEYS = frozenset({"name", "description", "public_tests", "solutions"})  # what detection looks for in a first row
PYTHON3 = (3, "3", "PYTHON3", "python3")
#: `meta.float_tolerance` of a problem that prints non-integer numbers (the harness's 1e-5).
FLOAT_TOLERANCE = 1e-5

def matches(row: dict[str, Any]) -> bool:
    return KEYS <= row.keys()


def _plain(value: Any) -> Any:
    """numpy arrays and nested structs from parquet as lists and dicts."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _tests(row: dict[str, Any], name: str, where: str) -> list[str]:
    value = _plain(row.get(name))
    if value is None:
        return []
    if not isinstance(value, dict) or "input" not in value or "output" not in value:
        raise ProblemFormatError(where, name, 'an object {"input": [...], "output": [...]}', value)
    inputs, outputs = value["input"], value["output"]
    return io_tests([] if inputs is None else inputs, [] if outputs is None else outputs, where, name)


def _reference(row: dict[str, Any], where: str) -> str:
    value = _plain(row.get("solutions"))
    if value is None:
        return ""
    if not isinstance(value, dict) or "language" not in value or "solution" not in value:
        raise ProblemFormatError(where, "solutions", 'an object {"language": [...], "solution": [...]}', value)
    languages, solutions = value["language"], value["solution"]
    for key, items in (("language", languages), ("solution", solutions)):
        if items is not None and not isinstance(items, (list, tuple)):
            raise ProblemFormatError(where, f"solutions.{key}", "a list", items)
    languages, solutions = list(languages or []), list(solutions or [])
    if len(languages) != len(solutions):
        raise ProblemFormatError(where, "solutions", f"as many languages as solutions ({len(solutions)})",
                                 len(languages))
    for k, (lang, text) in enumerate(zip(languages, solutions)):
        if lang in PYTHON3 and not isinstance(text, str):  # a Python 3 solution that is not a program
            raise ProblemFormatError(where, f"solutions.solution[{k}]", "the Python 3 solution's source text", text)
    return next((s for lang, s in zip(languages, solutions) if lang in PYTHON3), "")


def _time_limit(row: dict[str, Any], where: str) -> float | None:
    value = _plain(row.get("time_limit"))
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProblemFormatError(where, "time_limit", 'an object {"seconds": int, "nanos": int}', value)
    parts = [0 if value.get(k) is None else value[k] for k in ("seconds", "nanos")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in parts):
        raise ProblemFormatError(where, "time_limit", 'an object {"seconds": int, "nanos": int}', value)
    seconds = parts[0] + parts[1] / 1e9
    return float(seconds) if seconds > 0 else None


def _outputs(row: dict[str, Any], where: str) -> list[str]:
    """The golden outputs of every split (already checked by `_tests`), as text."""
    texts = []
    for split in ("public_tests", "private_tests", "generated_tests"):
        value = _plain(row.get(split))
        outputs = [] if value is None or value.get("output") is None else value["output"]
        texts.extend(as_text(o, where, f"{split}.outputs[{k}]") for k, o in enumerate(outputs))
    return texts


def convert(row: dict[str, Any], where: str) -> Problem:
    name = require_str(row, "name", where)
    counts, tests = {}, []
    for split in ("public_tests", "private_tests", "generated_tests"):
        found = _tests(row, split, where)
        counts[split.split("_")[0]] = len(found)
        tests.extend(found)
    reference = _reference(row, where)
    meta: dict[str, Any] = {"test_counts": counts}
    if prints_decimals(_outputs(row, where)):
        meta["float_tolerance"] = FLOAT_TOLERANCE
    if not reference:
        meta["no_reference"] = True
    limit = _time_limit(row, where)
    if limit is not None:
        meta["time_limit_s"] = limit
    memory = row.get("memory_limit_bytes")
    if isinstance(memory, (int, float)) and memory > 0:
        meta["memory_limit_mb"] = int(memory) // (1 << 20)
    for key in ("difficulty", "source", "cf_rating"):
        value = _plain(row.get(key))
        if value is not None:
            meta[key] = value
    return Problem(id=f"codecontests/{name}", question=require_str(row, "description", where), entry_point="",
                   reference=reference, tests=tests, source="codecontests", meta=meta, kind="stdin")
