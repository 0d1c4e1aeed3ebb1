"""Loading problem sets from any supported file, and writing the project's JSONL."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from codea1.data.formats import detect_format, get_format
from codea1.data.problem import Problem, ProblemFormatError
from codea1.data.rows import read_rows


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
    return problems


def save_problems(problems: Iterable[Problem], path: str | Path) -> int:
    """Write problems as the project's JSONL (one `Problem.to_dict()` a line); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for problem in problems:
            try:
                line = json.dumps(problem.to_dict(), ensure_ascii=False)
            except TypeError as exc:
                raise ProblemFormatError(f"problem {problem.id!r}", "meta", f"JSON-serialisable values ({exc})") from None
            handle.write(line + "\n")
            count += 1
    tmp.replace(path)
    return count
