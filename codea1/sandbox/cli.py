"""``codea1 sandbox run`` and ``codea1 sandbox check``: thin wrappers over the library."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


@app.command("run")
def run_command(
    file: Path = typer.Argument(..., help="Python program to run in the sandbox."),
    timeout: float = typer.Option(10.0, "--timeout", help="Wall-clock seconds for the whole run."),
    memory_mb: int = typer.Option(1024, "--memory-mb", help="Hard memory cap in MiB."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
) -> None:
    """Run FILE.py in the sandbox and print its status, output and resource use."""
    from codea1.sandbox import Executor, Job, Limits

    try:
        program = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        typer.echo(f"error: cannot read {file}: {e}", err=True)
        raise typer.Exit(2)
    try:
        limits = Limits(timeout_s=timeout, memory_mb=memory_mb)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
    with Executor(workers=1, limits=limits) as ex:
        r = ex.run(Job(program=program))
    if as_json:
        typer.echo(json.dumps(r.to_dict(), indent=2))
    else:
        typer.echo(f"status:     {r.status}")
        typer.echo(f"exit code:  {r.exit_code}")
        typer.echo(f"program ok: {r.program_ok}" + (f"  ({r.program_error})" if r.program_error else ""))
        if r.infra_error:
            typer.echo(f"infra:      {r.infra_error}")
        typer.echo(f"cpu:        {r.cpu_s:.3f} s   wall: {r.wall_s:.3f} s   peak: {r.peak_mb:.1f} MiB")
        typer.echo("--- stdout ---")
        typer.echo(r.stdout, nl=False)
        typer.echo("--- stderr ---")
        typer.echo(r.stderr, nl=False)
    raise typer.Exit(0 if r.status == "ok" else 1)


@app.command("check")
def check_command() -> None:
    """Self-test: which protections hold on this machine (exit 1 if any fails)."""
    from rich.console import Console
    from rich.table import Table

    from codea1.sandbox import Executor
    from codea1.sandbox.isolation import PROTECTIONS
    from codea1.sandbox.selfcheck import run_checks

    console = Console()
    with Executor(workers=1) as ex:
        prot = Table(title="Mechanisms on this machine")
        prot.add_column("mechanism")
        prot.add_column("state")
        prot.add_column("protects")
        for name, what in PROTECTIONS.items():
            state = ex.protections.get(name, "LOST: not reported")
            prot.add_row(name, "[green]holds[/]" if state is True else f"[red]{state}[/]", what)
        console.print(prot)
        results = run_checks(ex)
    table = Table(title="Attacks (one per class of SANDBOX.md); host = nothing left running, memory back")
    for col in ("check", "class", "verdict", "run status", "host", "what it shows"):
        table.add_column(col)
    failed = 0
    for c, ok, r, harm in results:
        failed += not ok
        table.add_row(c.name, c.attack, "[green]PASS[/]" if ok else "[red]FAIL[/]", r.status,
                      "[green]unharmed[/]" if not harm else f"[red]{'; '.join(harm)}[/]", c.explain)
    console.print(table)
    lost = [k for k, v in ex.protections.items() if v is not True]
    if lost:
        console.print(f"[yellow]lost protections: {', '.join(lost)}[/]")
    raise typer.Exit(1 if failed else 0)
