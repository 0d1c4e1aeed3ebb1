"""The problem set that ships inside the package (what the CPU demo trains on).

Written by the team for Code-A1 (not copied from a public data set): function-level
Python problems from easy to tricky, each with a reference solution, golden tests that
include at least one edge case a naive solution misses, a plausible but wrong `naive`
solution in `meta` (a realistic broken candidate), a difficulty tag, and a fixed
train/held-out split stratified by difficulty, recorded in each row's `meta["split"]`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from codea1.data.files import load_problems
from codea1.data.problem import Problem

BUNDLED_PATH = Path(__file__).parent / "bundled" / "problems.jsonl"
SPLITS = ("train", "heldout", "all")


@lru_cache(maxsize=1)
def _all() -> tuple[Problem, ...]:
    return tuple(load_problems(BUNDLED_PATH, fmt="project"))


def bundled_problems(split: str = "all") -> list[Problem]:
    """The bundled problems of one split ("train", "heldout" or "all"), in file order.

    Fresh copies every call, so callers may change them freely.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    import copy

    return [copy.deepcopy(p) for p in _all() if split == "all" or p.meta.get("split") == split]
