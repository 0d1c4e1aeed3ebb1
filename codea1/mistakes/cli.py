"""`codea1 mistakes ...`: see what the models keep getting wrong, even while a run writes.

Every command opens the book read-only; `--book` takes the file or a run directory.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from codea1.mistakes.book import MistakeBook

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

BookOption = Annotated[
    Path,
    typer.Option("--book", "-b", help="Mistake Book file, or a run directory holding mistakes.sqlite."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _open(book: Path) -> MistakeBook:
    try:
        return MistakeBook(book, readonly=True)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--book") from err


@app.command("stats")
def stats_command(book: BookOption, as_json: JsonOption = False) -> None:
    """How big the book is and which step it has seen last."""
    with _open(book) as mb:
        stats = mb.stats()
        history = mb.step_history()[-5:]
    if as_json:
        typer.echo(json.dumps({**asdict(stats), "recent_steps": [asdict(s) for s in history]}))
        return
    console = Console()
    console.print(f"[bold]{mb.path}[/bold]")
    console.print(
        f"problems {stats.problems}  tests {stats.tests}  total frequency {stats.total_frequency}  "
        f"max frequency {stats.max_frequency}  last step {stats.last_step}  steps applied {stats.steps_applied}"
    )
    if history:
        table = Table("step", "problems", "added", "increased", "decreased", "removed", title="recent steps")
        for s in history:
            table.add_row(*(str(v) for v in (s.step, s.problems, s.added, s.increased, s.decreased, s.removed)))
        console.print(table)


@app.command("list")
def list_command(
    book: BookOption,
    limit: Annotated[int, typer.Option(help="Show at most this many problems (0: all).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Problems with the most recorded mistakes, and each one's most frequent test."""
    with _open(book) as mb:
        problems = mb.problems()
        if limit > 0:
            problems = problems[:limit]
        rows = [(pid, n, total, (mb.top(pid, 1) or [""])[0]) for pid, n, total in problems]
    if as_json:
        for pid, n, total, top in rows:
            typer.echo(json.dumps({"problem_id": pid, "tests": n, "total_frequency": total, "top_test": top}))
        return
    table = Table("problem", "tests", "total freq", "most frequent test")
    for pid, n, total, top in rows:
        table.add_row(pid, str(n), str(total), top)
    Console().print(table)


@app.command("show")
def show_command(
    problem: Annotated[str, typer.Argument(help="Problem id, e.g. MBPP/2.")],
    book: BookOption,
    limit: Annotated[int, typer.Option(help="Show at most this many tests (0: all).")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Every test of one problem, most frequent first (the first 8 are replayed in training)."""
    with _open(book) as mb:
        entries = mb.entries(problem)
    if not entries:
        typer.echo(f"{problem}: no tests in {book}", err=True)
        raise typer.Exit(1)
    if limit > 0:
        entries = entries[:limit]
    if as_json:
        for rank, e in enumerate(entries, 1):
            typer.echo(json.dumps({"rank": rank, **asdict(e)}))
        return
    table = Table("rank", "freq", "first step", "last step", "test", title=problem)
    for rank, e in enumerate(entries, 1):
        table.add_row(str(rank), str(e.frequency), str(e.first_step), str(e.last_step), e.test)
    Console().print(table)


@app.command("export")
def export_command(
    out: Annotated[Path, typer.Argument(help="JSONL file to write (one test a line).")],
    book: BookOption,
) -> None:
    """Export the whole book as JSONL (`problem_id`, `rank`, `test`, `frequency`, steps)."""
    with _open(book) as mb:
        count = mb.export_jsonl(out)
    typer.echo(f"wrote {count} tests to {out}")
