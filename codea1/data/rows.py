"""Reading raw rows (plain dicts) from the file types data sets come in.

Every row comes with a `where` string ("FILE, row N") so that a format converter can
name the exact row of a bad record. Rows are numbered from 1; for JSONL the number is
the line number.
"""

from __future__ import annotations

import gzip
import json
import zlib
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
    elif name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        reader = _jsonl_rows if name.endswith((".jsonl", ".jsonl.gz")) else _json_rows
        try:
            yield from reader(path)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # a damaged or truncated .gz
            raise ProblemFormatError(str(path), None, f"a readable gzip file ({exc})") from None
    else:
        raise ProblemFormatError(str(path), None, f"a file ending in one of {', '.join(SUFFIXES)}")


def _open_bytes(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return path.open("rb")


def _decode(raw: bytes, path: Path, row: int) -> str:
    """UTF-8 text of one row; an encoding error names the file, the row and the byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemFormatError(
            f"{path}, row {row}", None, f"UTF-8 text (byte {exc.start} of the row: {exc.reason})"
        ) from None


def _json_error(exc: BaseException) -> str:
    """What `json.loads` rejected: its message, also for what it raises beside
    JSONDecodeError (an int of more digits than Python converts; nesting past the
    recursion limit)."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deep to read"
    return str(exc)


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    first, array = True, False
    with _open_bytes(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = _decode(raw, path, number)
            if not line.strip():
                continue
            if first and line.lstrip().startswith("["):
                array = True  # a JSON array under a .jsonl name (UnLeakedTestBench ships ULT.jsonl so)
                break
            first = False
            where = f"{path}, row {number}"
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise ProblemFormatError(where, None, f"one JSON object per line ({_json_error(exc)})") from None
            if not isinstance(row, dict):
                raise ProblemFormatError(where, None, "a JSON object", row)
            yield where, row
    if array:
        yield from _json_rows(path, lines=False)


def _json_rows(path: Path, lines: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a JSON array (or object) file; `lines`: one that does not parse as a
    whole but starts with an object is read as JSON Lines (many data sets ship them under
    a .json name)."""
    with _open_bytes(path) as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # the line of the bad byte: a JSON file's "row"
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProblemFormatError(f"{path}, line {line}", None, f"UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # Many data sets ship JSON Lines under a .json name.
        first = text.lstrip()[:1]
        if lines and first == "{" and "\n" in text.strip():
            yield from _jsonl_rows(path)
            return
        line = getattr(exc, "lineno", None)
        raise ProblemFormatError(
            f"{path}, line {line}" if line else str(path), None, f"a JSON array of objects ({_json_error(exc)})"
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
    for group in range(parquet.num_row_groups):  # (one group at a time: an error names its first row)
        batches = parquet.iter_batches(batch_size=256, row_groups=[group])
        while (rows := _next_rows(batches, path, number)) is not None:
            for row in rows:
                number += 1
                yield f"{path}, row {number}", row


def _next_rows(batches: Iterator, path: Path, done: int) -> list[dict[str, Any]] | None:
    """The next batch's rows, None after the last; a damaged page or row group shows only
    when it is read: a ProblemFormatError naming the first row not read."""
    try:
        batch = next(batches, None)
        return None if batch is None else batch.to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types (OSError, ArrowInvalid, ...)
        raise ProblemFormatError(f"{path}, row {done + 1}", None,
                                 f"a readable parquet file (rows from here on cannot be read: {exc})") from None
