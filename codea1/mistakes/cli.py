"""`codea1 mistakes ...`: see what the models keep getting wrong, even while a run writes.

Every command opens the book read-only. The book is named like `codea1 plot RUN_DIR`:
the run directory (or the mistakes.sqlite file) first; `--book RUN_DIR` is the older
spelling, still accepted.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from codea1.cli_options import JSON_OPTION, RUN_DIR_HELP, check_output_file
from codea1.mistakes.book import BOOK_FILENAME, MistakeBook, resolve_book_path
from codea1.output_files import atomic_output, input_named_as_output, refuse_output_in_run

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

RunDirArgument = Annotated[
    Optional[Path],
    typer.Argument(help=RUN_DIR_HELP + " Or the mistakes.sqlite file itself.", show_default=False),
]
BookOption = Annotated[
    Optional[Path],
    typer.Option("--book", "-b", help="The same as RUN_DIR (the older spelling, still accepted).", show_default=False),
]


def _book_path(run_dir: Optional[Path], book: Optional[Path]) -> tuple[Path, str]:
    """The book named by RUN_DIR or by --book (exactly one of them), and which one named it."""
    if run_dir is not None and book is not None and Path(run_dir) != Path(book):
        raise typer.BadParameter("give the run directory once: RUN_DIR or --book, not both", param_hint="--book")
    if run_dir is None and book is None:
        raise typer.BadParameter("missing: the run directory (or its mistakes.sqlite)", param_hint="RUN_DIR")
    return (Path(run_dir), "RUN_DIR") if run_dir is not None else (Path(book), "--book")


def _with_book(first: Optional[str], second: Optional[str], book: Optional[Path],
               what: str) -> tuple[tuple[Path, str], str]:
    """`CMD RUN_DIR X` or the older `CMD X --book RUN_DIR`: ((book path, how it was named), X)."""
    if book is not None and second is None:
        if first is None:
            raise typer.BadParameter(f"missing: {what}", param_hint=what)
        return (Path(book), "--book"), first
    if first is None or second is None:
        raise typer.BadParameter(f"expected RUN_DIR {what}", param_hint=what)
    return _book_path(Path(first), book), second


def _open(named: tuple[Path, str]) -> MistakeBook:
    book, hint = named
    try:
        return MistakeBook(book, readonly=True)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint=hint) from err


@app.command("stats")
def stats_command(run_dir: RunDirArgument = None, book: BookOption = None, as_json: bool = JSON_OPTION) -> None:
    """How big the book is and which step it has seen last."""
    with _open(_book_path(run_dir, book)) as mb:
        stats = mb.stats()
        history = mb.step_history()[-5:]
    if as_json:
        typer.echo(json.dumps({**asdict(stats), "recent_steps": [asdict(s) for s in history]}))
        return
    console = Console()
    console.print(f"[bold]{mb.path}[/bold]", soft_wrap=True)
    # one figure a line: a narrow terminal never splits a label from its value
    figures = Table.grid(padding=(0, 2))
    figures.add_column(justify="left")
    figures.add_column(justify="right")
    for label, value in (("problems", stats.problems), ("tests", stats.tests),
                         ("total frequency", stats.total_frequency), ("max frequency", stats.max_frequency),
                         ("last step", stats.last_step), ("steps applied", stats.steps_applied)):
        figures.add_row(label, str(value))
    console.print(figures)
    if history:
        table = Table("step", "problems", "added", "increased", "decreased", "removed", title="recent steps")
        for s in history:
            table.add_row(*(str(v) for v in (s.step, s.problems, s.added, s.increased, s.decreased, s.removed)))
        console.print(table)


_TEST_MIN = 8  # the narrowest `mistakes list` shows a test


@app.command("list")
def list_command(
    run_dir: RunDirArgument = None,
    book: BookOption = None,
    limit: Annotated[int, typer.Option(min=0, help="Show at most this many problems (0: all).")] = 50,
    as_json: bool = JSON_OPTION,
) -> None:
    """Problems with the most recorded mistakes, and each one's most frequent test."""
    with _open(_book_path(run_dir, book)) as mb:
        problems = mb.problems()
        if limit > 0:
            problems = problems[:limit]
        rows = [(pid, n, total, (mb.top(pid, 1) or [""])[0]) for pid, n, total in problems]
    if as_json:
        for pid, n, total, top in rows:
            typer.echo(json.dumps({"problem_id": pid, "tests": n, "total_frequency": total, "top_test": top}))
        return
    # an id is never cut (`mistakes show` takes it back): on one line where the terminal has
    # room for it beside the figures and a bit of the test, else folded; a long test folds
    console = Console()
    others = len("tests") + len("total freq") + _TEST_MIN + 13  # (the borders and padding of 4 columns)
    one_line = max((len(pid) for pid, *_ in rows), default=0) + others <= console.width
    table = Table()
    table.add_column("problem", no_wrap=one_line, overflow="fold")
    table.add_column("tests", no_wrap=True)
    table.add_column("total freq", no_wrap=True)
    table.add_column("most frequent test", overflow="fold", min_width=_TEST_MIN)
    for pid, n, total, top in rows:
        table.add_row(pid, str(n), str(total), top)
    console.print(table)


@app.command("show")
def show_command(
    run_dir: Annotated[Optional[str], typer.Argument(
        metavar="RUN_DIR", help=RUN_DIR_HELP + " Or the mistakes.sqlite file itself.", show_default=False)] = None,
    problem: Annotated[Optional[str], typer.Argument(
        metavar="PROBLEM", help="Problem id, e.g. MBPP/2.", show_default=False)] = None,
    book: BookOption = None,
    limit: Annotated[int, typer.Option(min=0, help="Show at most this many tests (0: all).")] = 0,
    as_json: bool = JSON_OPTION,
) -> None:
    """Every test of one problem, most frequent first (the first mistakes.top_k, or judge.suite_size, are
    replayed in training)."""
    named, problem_id = _with_book(run_dir, problem, book, "PROBLEM")
    with _open(named) as mb:
        entries = mb.entries(problem_id)
        known = len(mb.problems()) if not entries else 0
    if not entries:  # an id the book does not hold: bad input (exit 2), as any unknown name
        raise typer.BadParameter(f"{problem_id!r}: no such problem in the Mistake Book {named[0]} (it holds tests "
                                 f"of {known} problem{'' if known == 1 else 's'}; `codea1 mistakes list "
                                 f"{named[0]}` shows their ids)", param_hint="PROBLEM")
    if limit > 0:
        entries = entries[:limit]
    if as_json:
        for rank, e in enumerate(entries, 1):
            typer.echo(json.dumps({"rank": rank, **asdict(e)}))
        return
    table = Table("rank", "freq", "first step", "last step", "test", title=problem_id)
    for rank, e in enumerate(entries, 1):
        table.add_row(str(rank), str(e.frequency), str(e.first_step), str(e.last_step), e.test)
    Console().print(table)


@app.command("export")
def export_command(
    run_dir: Annotated[Optional[str], typer.Argument(
        metavar="RUN_DIR", help=RUN_DIR_HELP + " Or the mistakes.sqlite file itself.", show_default=False)] = None,
    out: Annotated[Optional[str], typer.Argument(
        metavar="OUT", help="JSONL file to write (one test a line).", show_default=False)] = None,
    book: BookOption = None,
) -> None:
    """Export the whole book as JSONL (`problem_id`, `rank`, `test`, `frequency`, steps) to OUT,
    a file outside any training run's directory."""
    named, target = _with_book(run_dir, out, book, "OUT")
    check_output_file(Path(target), "OUT")
    _check_export_target(named[0], Path(target))
    with _open(named) as mb, atomic_output(target) as tmp:
        count = mb.export_jsonl(tmp)
    typer.echo(f"wrote {count} tests to {target}")


def _check_export_target(named: Path, out: Path) -> None:
    """OUT must not be the book (or its SQLite side files), nor lie in the book's run
    directory (the folder of a mistakes.sqlite, even one that is not a whole run), nor in
    any other training run's directory (`refuse_output_in_run`): the export is written
    beside OUT and renamed over it, which would replace the book or a run's file."""
    from codea1.train.cli import is_run_config

    book = resolve_book_path(named)
    run_dir = book.parent if named.is_dir() or book.name == BOOK_FILENAME else None
    sidecars = [book.with_name(book.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
    hit = input_named_as_output(out, [book, *sidecars], [run_dir] if run_dir is not None else [])
    if hit is not None:
        what = "the Mistake Book being exported" if hit in (book, *sidecars) else f"in the run directory {run_dir}"
        raise typer.BadParameter(f"{out} is {what}; give a file name outside it", param_hint="OUT")
    try:
        refuse_output_in_run(out, is_run_config)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="OUT") from None
