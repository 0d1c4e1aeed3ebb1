"""Reading raw rows (plain dicts) from the file types data sets come in.

Every row comes with a `where` string ("FILE, row N") so that a format converter can
name the exact row of a bad record. Rows are numbered from 1; for JSONL the number is
the line number.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codea1.data.problem import ProblemFormatError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")


def read_rows(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield `(where, row)` for every record of a JSONL(.gz), JSON array(.gz) or parquet file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such problem file")
    name = path.name.lower()
    if name.endswith(".parquet"):
        yield from _parquet_rows(path)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        yield from _jsonl_rows(path)
    elif name.endswith((".json", ".json.gz")):
        yield from _json_rows(path)
    else:
        raise ProblemFormatError(str(path), None, f"a file ending in one of {', '.join(SUFFIXES)}")


def _open_text(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}, row {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ProblemFormatError(where, None, f"one JSON object per line ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ProblemFormatError(where, None, "a JSON object", row)
            yield where, row


def _json_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with _open_text(path) as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # Many data sets ship JSON Lines under a .json name.
        first = text.lstrip()[:1]
        if first == "{" and "\n" in text.strip():
            yield from _jsonl_rows(path)
            return
        raise ProblemFormatError(
            f"{path}, line {exc.lineno}", None, f"a JSON array of objects ({exc.msg})"
        ) from None
    if isinstance(data, dict):
        # {"task_id": {...}, ...} mappings and {"data": [...]} wrappers are both common.
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(data) == 1 and lists:
            data = lists[0]
        elif all(isinstance(v, dict) for v in data.values()):
            data = list(data.values())
        else:
            data = [data]
    if not isinstance(data, list):
        raise ProblemFormatError(str(path), None, "a JSON array of objects", data)
    for number, row in enumerate(data, start=1):
        where = f"{path}, row {number}"
        if not isinstance(row, dict):
            raise ProblemFormatError(where, None, "a JSON object", row)
        yield where, row


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow.parquet as pq  # only parquet users pay for the import

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise ProblemFormatError(str(path), None, f"a readable parquet file ({exc})") from None
    number = 0
    for batch in parquet.iter_batches(batch_size=256):
        for row in batch.to_pylist():
            number += 1
            yield f"{path}, row {number}", row
