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
"""

from __future__ import annotations

from typing import Any

from codea1.data.formats._stdin import io_tests
from codea1.data.problem import Problem, ProblemFormatError, require_str

NAME = "codecontests"
DESCRIPTION = "CodeContests rows (name, description, public/private/generated_tests, solutions), parquet or JSON"
KEYS = frozenset({"name", "description", "public_tests", "solutions"})  # what detection looks for in a first row
PYTHON3 = (3, "3", "PYTHON3", "python3")


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
    languages, solutions = list(value["language"] or []), list(value["solution"] or [])
    if len(languages) != len(solutions):
        raise ProblemFormatError(where, "solutions", f"as many languages as solutions ({len(solutions)})",
                                 len(languages))
    return next((s for lang, s in zip(languages, solutions) if lang in PYTHON3 and isinstance(s, str)), "")


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


def convert(row: dict[str, Any], where: str) -> Problem:
    name = require_str(row, "name", where)
    counts, tests = {}, []
    for split in ("public_tests", "private_tests", "generated_tests"):
        found = _tests(row, split, where)
        counts[split.split("_")[0]] = len(found)
        tests.extend(found)
    reference = _reference(row, where)
    meta: dict[str, Any] = {"test_counts": counts}
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
