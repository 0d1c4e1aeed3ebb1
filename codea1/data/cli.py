"""`codea1 data ...`: check and convert problem sets (thin layer over `codea1.data`).

Errors (a missing file, a bad row, an empty set) are raised as the library's own
exceptions; `codea1.cli` turns them into one line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from codea1.cli_options import (
    CALL_TIMEOUT_OPTION,
    JSON_OPTION,
    LIMIT_OPTION,
    MEMORY_MB_OPTION,
    PROBLEMS_HELP,
    STDIN_MAX_OUTPUT_MB_OPTION,
    STDIN_TIME_SCALE_OPTION,
    TIMEOUT_OPTION,
    WORKERS_OPTION,
    check_output_file,
)
from codea1.data.formats import FORMATS  # light: the format modules import only ast/json/re
from codea1.output_files import input_named_as_output, refuse_output_in_run

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

FORMAT_HELP = "Input format (default: detected from the first row): " + ", ".join(FORMATS)


def _load(path: str, fmt: Optional[str], hint: str):
    from codea1.data import bundled_problems, bundled_split, load_problems

    if Path(path).is_dir():
        raise typer.BadParameter(f"{path} is a directory; expected a problem file (.jsonl, .jsonl.gz, .json, "
                                 ".json.gz or .parquet) or a bundled set such as 'bundled:demo'", param_hint=hint)
    split = None if Path(path).exists() else bundled_split(path)
    if split is not None:
        return bundled_problems(split)
    return load_problems(path, fmt=fmt)


@app.command("check")
def check_command(
    file: str = typer.Argument(..., help=PROBLEMS_HELP),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
    timeout: float = TIMEOUT_OPTION,
    call_timeout: float = CALL_TIMEOUT_OPTION,
    memory_mb: int = MEMORY_MB_OPTION,
    stdin_time_scale: float = STDIN_TIME_SCALE_OPTION,
    stdin_max_output_mb: float = STDIN_MAX_OUTPUT_MB_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    limit: Optional[int] = LIMIT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run every reference (and its golden tests) in the sandbox; report broken rows.

    Exits 1 when any row is broken or could not be checked.
    """
    from codea1.data.check import check_problems
    from codea1.sandbox import Limits

    limits = Limits(timeout_s=timeout, call_timeout_s=call_timeout, memory_mb=memory_mb)
    problems = _load(file, fmt, "FILE")
    if limit is not None:
        problems = problems[:limit]
    start = time.perf_counter()
    results = check_problems(problems, limits=limits, workers=workers, stdin_time_scale=stdin_time_scale,
                             stdin_max_output_bytes=int(stdin_max_output_mb * 2**20))
    elapsed = time.perf_counter() - start
    bad = [r for r in results if not r.ok]
    untested = [r.id for r in results if r.ok and not r.golden_tests]
    untested_note = (f"; {len(untested)} of the ok ones with no golden test, so only their reference was run "
                     f"(training uses them; validation and eval code skip them): {', '.join(untested[:5])}"
                     f"{' ...' if len(untested) > 5 else ''}") if untested else ""
    if as_json:
        for r in results:
            typer.echo(json.dumps({"id": r.id, "status": r.status, "reasons": r.reasons, "wall_s": r.wall_s,
                                   "golden_tests": r.golden_tests}))
    else:
        for r in bad:
            typer.echo(f"{r.status.upper():9} {r.id}: " + "; ".join(r.reasons))
    typer.echo(
        f"{len(results) - len(bad)}/{len(results)} problems ok, {len(bad)} broken or unchecked{untested_note} "
        f"({elapsed:.1f} s)",
        err=as_json,
    )
    if bad:
        raise typer.Exit(1)


@app.command("convert")
def convert_command(
    source: str = typer.Argument(..., help=PROBLEMS_HELP),
    out: Path = typer.Argument(..., help="Output file, the project's JSONL (a name ending in .jsonl)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
) -> None:
    """Convert a problem set to the project's JSONL (written whole, or not at all; never into
    a training run's directory)."""
    from codea1.data import save_problems
    from codea1.train.cli import is_run_config

    check_output_file(out, "OUT", (".jsonl",))
    if input_named_as_output(out, [source]) is not None:
        raise typer.BadParameter(f"{out} is the SOURCE file being converted; give a new file name", param_hint="OUT")
    try:
        refuse_output_in_run(out, is_run_config)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="OUT") from None
    problems = _load(source, fmt, "SOURCE")
    count = save_problems(problems, out)
    typer.echo(f"wrote {count} problems to {out}")
