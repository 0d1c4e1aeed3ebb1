"""`codea1 data ...`: check and convert problem sets (thin layer over `codea1.data`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from codea1.data.check import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
from codea1.data.formats import FORMATS  # light: the format modules import only ast/json/re

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

BUNDLED_HELP = "Problem file, or 'bundled' ('bundled:train', 'bundled:heldout') for the bundled set."

FORMAT_HELP = "Input format (default: detected from the first row): " + ", ".join(FORMATS)


def _load(path: str, fmt: Optional[str]):
    from codea1.data import ProblemFormatError, bundled_problems, bundled_split, load_problems

    try:
        split = None if Path(path).exists() else bundled_split(path)
        if split is not None:
            return bundled_problems(split)
        return load_problems(path, fmt=fmt)
    except (ProblemFormatError, FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command("check")
def check_command(
    file: str = typer.Argument(..., help=BUNDLED_HELP),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_S, help="Seconds allowed for one problem's run."),
    call_timeout: float = typer.Option(3.0, help="Seconds allowed for one golden test call."),
    memory_mb: int = typer.Option(DEFAULT_MEMORY_MB, help="Memory cap of one run (real golden programs are big)."),
    workers: Optional[int] = typer.Option(None, help="Sandbox workers (default: CPU count)."),
    limit: Optional[int] = typer.Option(None, help="Check only the first N problems."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per problem."),
) -> None:
    """Run every reference (and its golden tests) in the sandbox; report broken rows.

    Exits 1 when any row is broken or could not be checked.
    """
    from codea1.data.check import check_problems
    from codea1.sandbox import Limits

    problems = _load(file, fmt)
    if limit is not None:
        problems = problems[:limit]
    start = time.perf_counter()
    results = check_problems(problems, limits=Limits(timeout_s=timeout, call_timeout_s=call_timeout, memory_mb=memory_mb), workers=workers)
    elapsed = time.perf_counter() - start
    bad = [r for r in results if not r.ok]
    if as_json:
        for r in results:
            typer.echo(json.dumps({"id": r.id, "status": r.status, "reasons": r.reasons, "wall_s": r.wall_s}))
    else:
        for r in bad:
            typer.echo(f"{r.status.upper():9} {r.id}: " + "; ".join(r.reasons))
    typer.echo(
        f"{len(results) - len(bad)}/{len(results)} problems ok, {len(bad)} broken or unchecked "
        f"({elapsed:.1f} s)",
        err=as_json,
    )
    if bad:
        raise typer.Exit(1)


@app.command("convert")
def convert_command(
    source: str = typer.Argument(..., help=BUNDLED_HELP),
    out: Path = typer.Argument(..., help="Output file (the project's JSONL)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
) -> None:
    """Convert a problem set to the project's JSONL."""
    from codea1.data import save_problems

    problems = _load(source, fmt)
    count = save_problems(problems, out)
    typer.echo(f"wrote {count} problems to {out}")


if __name__ == "__main__":
    app()
