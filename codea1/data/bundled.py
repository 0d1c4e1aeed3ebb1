"""The problem set that ships inside the package (what the CPU demo trains on).

Written by the team for Code-A1 (not copied from a public data set): 90 function-level
Python problems, 30 easy / 35 medium / 25 hard. Each has a question in MBPP+ `problem`
style (signature, then a docstring with one example assert), a reference solution, 5-10
golden tests `assert f(LITERALS) == LITERAL` including at least one edge case a naive
solution misses, and in `meta`: `difficulty`, `split` ("train" or "heldout": every fifth
problem of each difficulty, in file order, is held out: 72/18), `naive` (a plausible
but wrong solution that passes the example and fails an edge case: a realistic broken
candidate for judge benchmarks and demos) and `edge_case` (what the naive one misses).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

from codea1.data.files import load_problems
from codea1.data.problem import Problem

BUNDLED_PATH = Path(__file__).parent / "bundled" / "problems.jsonl"
SPLITS = ("train", "heldout", "all", "demo")
# base pass rate on the golden tests between ~0.2 and ~0.7 in earlier cpu-demo runs
DEMO_IDS = (
    "a1/006-digit-sum", "a1/012-count-overlapping", "a1/021-top-k-frequent", "a1/032-acronym",
    "a1/035-caesar-cipher", "a1/040-run-length-encode", "a1/043-triangle-kind",
    "a1/087-longest-consecutive-run",
)


@lru_cache(maxsize=1)
def _all() -> tuple[Problem, ...]:
    return tuple(load_problems(BUNDLED_PATH, fmt="project"))


def bundled_problems(split: str = "all") -> list[Problem]:
    """The bundled problems of one split ("train", "heldout", "all" or "demo", a subset
    of "train"), in file order.

    Fresh copies every call, so callers may change them freely.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")

    if split == "demo":
        return [copy.deepcopy(p) for p in _all() if p.id in DEMO_IDS]
    return [copy.deepcopy(p) for p in _all() if split == "all" or p.meta.get("split") == split]


def bundled_split(text: str) -> str | None:
    """The split a problem-set argument names (`bundled` is "all", `bundled:train`,
    `bundled:heldout`, `bundled:demo`), or None when it names a file. An unknown split is
    an error."""
    if text != "bundled" and not text.startswith("bundled:"):
        return None
    split = text.partition(":")[2] or "all"
    if split not in SPLITS:
        raise ValueError(f"{text!r}: unknown bundled split {split!r}; expected bundled, "
                         f"bundled:train, bundled:heldout or bundled:demo")
    return split
