"""Loading problem sets from any supported file, and writing the project's JSONL."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable
from pathlib import Path

from codea1.data.formats import detect_format, get_format
from codea1.data.problem import Problem, ProblemFormatError
from codea1.data.rows import read_rows
from codea1.output_files import atomic_output


def load_problems(path: str | Path, fmt: str | None = None) -> list[Problem]:
    """All problems of `path`, whose format is detected from its first row unless `fmt` names it.

    Formats: see `codea1.data.formats.FORMATS`. A bad row raises ProblemFormatError
    naming the file, row, field and what was expected; duplicate ids are an error too.
    """
    module = get_format(fmt) if fmt is not None else None
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for where, row in read_rows(path):
        if module is None:
            module = detect_format(row, where)
        problem = module.convert(row, where)
        if problem.id in seen:
            raise ProblemFormatError(where, "id", f"an id not used before (also at {seen[problem.id]})", problem.id)
        seen[problem.id] = where
        problems.append(problem)
    if not problems:
        raise ProblemFormatError(str(path), None, "at least one problem; the file has none")
    return problems


def save_problems(problems: Iterable[Problem], path: str | Path) -> int:
    """Write problems as the project's JSONL (one `Problem.to_dict()` a line); returns the count.

    The file is written whole or not at all (a temporary file, renamed at the end): a
    failure leaves an existing file as it was and no temporary file behind. The name must
    end in .jsonl, so that a file named .parquet (or .json) is never JSONL in disguise.
    """
    path = Path(path)
    if not path.name.lower().endswith(".jsonl"):
        raise ValueError(f"{path}: the project's JSONL needs a file name ending in .jsonl")
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file name", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_output(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for problem in problems:
            try:
                line = json.dumps(problem.to_dict(), ensure_ascii=False)
            except TypeError as exc:
                raise ProblemFormatError(f"problem {problem.id!r}", "meta", f"JSON-serialisable values ({exc})") from None
            handle.write(line + "\n")
            count += 1
    return count
