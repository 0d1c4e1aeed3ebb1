"""Problem-file formats: each module turns one raw row into a `Problem`.

A format module has `NAME`, `DESCRIPTION`, `matches(row) -> bool` (used to auto-detect
the format from a file's first row) and `convert(row, where) -> Problem`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from codea1.data.formats import bigcodebench, codea1_rows, evalplus, humaneval, kodcode, project, unleaked
from codea1.data.problem import ProblemFormatError

# Most specific first: detection takes the first format whose keys match.
FORMATS: dict[str, ModuleType] = {
    m.NAME: m for m in (project, codea1_rows, evalplus, bigcodebench, humaneval, kodcode, unleaked)
}


def get_format(name: str) -> ModuleType:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown problem format {name!r}; expected one of {', '.join(FORMATS)}") from None


def detect_format(row: dict[str, Any], where: str) -> ModuleType:
    """The format of a data set, from its first row's keys."""
    for module in FORMATS.values():
        if module.matches(row):
            return module
    lines = "; ".join(f"{m.NAME}: {m.DESCRIPTION}" for m in FORMATS.values())
    raise ProblemFormatError(
        where, None, f"a row of a known format (keys {sorted(row)[:12]} match none of: {lines})"
    )


__all__ = ["FORMATS", "detect_format", "get_format"]
