"""Problem-file formats: each module turns one raw row into a `Problem`.

A format module has `NAME`, `DESCRIPTION`, `matches(row) -> bool` (used to auto-detect
the format from a file's first row) and `convert(row, where) -> Problem`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from codea1.data.formats import (
    bigcodebench, codea1_rows, codecontests, evalplus, humaneval, kodcode, livecodebench, project, taco, unleaked)
from codea1.data.problem import ProblemFormatError

# Most specific first: detection takes the first format whose keys match.
FORMATS: dict[str, ModuleType] = {
    m.NAME: m for m in (project, codea1_rows, evalplus, bigcodebench, humaneval, kodcode, unleaked,
                        codecontests, taco, livecodebench)
}


def get_format(name: str) -> ModuleType:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown problem format {name!r}; expected one of {', '.join(FORMATS)}") from None


def detect_format(row: dict[str, Any], where: str) -> ModuleType:
    """The format of a data set, from its first row's keys.

    When none matches, the error names the closest format (most of its keys present)
    and the columns it lacks, e.g. a parquet file missing `GT_code`.
    """
    for module in FORMATS.values():
        if module.matches(row):
            return module
    keys = set(map(str, row))
    overlap, closest = max(((len(m.KEYS & keys), m) for m in FORMATS.values()), key=lambda t: t[0])
    names = ", ".join(FORMATS)
    if overlap:
        missing = ", ".join(sorted(closest.KEYS - keys))
        expected = (f"the columns of a known format: closest is {closest.NAME} ({closest.DESCRIPTION}), "
                    f"which lacks {missing}")
    else:
        expected = f"the columns of a known format ({names}; see `codea1 data check --help`)"
    raise ProblemFormatError(where, None, f"{expected}; the row has {sorted(keys)[:12]}")


__all__ = ["FORMATS", "detect_format", "get_format"]
