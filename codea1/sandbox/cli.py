"""``codea1 sandbox run`` and ``codea1 sandbox check``: thin wrappers over the library."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from codea1.cli_options import JSON_OPTION, MEMORY_MB_OPTION, TIMEOUT_OPTION

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


@app.command("run")
def run_command(
    file: Path = typer.Argument(..., help="Python program to run in the sandbox."),
    timeout: float = TIMEOUT_OPTION,
    memory_mb: int = MEMORY_MB_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run FILE.py in the sandbox and print its status, output and resource use."""
    from codea1.sandbox import Executor, Job, Limits

    try:
        program = file.read_text(encoding="utf-8")
    except OSError as e:
        raise typer.BadParameter(f"cannot read {file}: {e.strerror}", param_hint="FILE") from None
    except UnicodeDecodeError as e:
        raise typer.BadParameter(f"{file}: not UTF-8 text ({e.reason} at byte {e.start})", param_hint="FILE") from None
    limits = Limits(timeout_s=timeout, memory_mb=memory_mb)
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


def protection_state(value) -> tuple[str, str]:
    """("held" | "degraded" | "missing", why) of a value of ``Executor.protections``."""
    if value is True:
        return "held", ""
    text = str(value)
    for prefix, state in (("DEGRADED:", "degraded"), ("partial:", "degraded"), ("LOST:", "missing")):
        if text.startswith(prefix):
            return state, text[len(prefix):].strip()
    return "missing", text


@app.command("check")
def check_command() -> None:
    """Self-test: which protections hold on this machine, one attack per class, and canary
    files in the checkout, the current directory, home and /tmp that runs must not see
    (exit 1 if anything fails, with one line on stderr per visible canary)."""
    from rich.console import Console
    from rich.table import Table

    from codea1.sandbox import Executor
    from codea1.sandbox.isolation import PROTECTIONS
    from codea1.sandbox.selfcheck import check_canaries, run_checks

    console = Console()
    with Executor(workers=1) as ex:
        if ex.cgroup_setup is not None:
            console.print(ex.cgroup_setup.summary(), soft_wrap=True, highlight=False)
        prot = Table(title="Mechanisms on this machine")
        prot.add_column("mechanism")
        prot.add_column("state")
        prot.add_column("protects")
        for name, what in PROTECTIONS.items():
            state, why = protection_state(ex.protections.get(name, "LOST: not reported"))
            colour = {"held": "green", "degraded": "yellow"}.get(state, "red")
            prot.add_row(name, f"[{colour}]{state}[/]" + (f": {why}" if why else ""), what)
        console.print(prot)
        view = (ex._all[0].hello or {}).get("view") if ex._all else None
        if view:
            console.print("A run sees, read-only: " + ", ".join(view["binds"])
                          + (f"; covered inside them: {', '.join(view['masks'])}" if view["masks"] else ""),
                          soft_wrap=True, highlight=False)
        results = run_checks(ex)
        canaries = check_canaries(ex)
    table = Table(title="Attacks (one per class of SANDBOX.md); host = nothing left running, memory back")
    for col in ("check", "class", "verdict", "run status", "host", "what it shows"):
        table.add_column(col)
    failed = 0
    for c, ok, r, harm in results:
        failed += not ok
        table.add_row(c.name, c.attack, "[green]PASS[/]" if ok else "[red]FAIL[/]", r.status,
                      "[green]unharmed[/]" if not harm else f"[red]{'; '.join(harm)}[/]", c.explain)
    console.print(table)
    hidden = Table(title="Host directories runs must not see (a canary file planted in each, removed after)")
    for col in ("place", "directory", "verdict", "what the run could do"):
        hidden.add_column(col)
    for c in canaries:
        failed += c.visible or c.problem is not None
        verdict = ("[red]FAIL[/]" if c.visible else "[green]PASS[/]") if c.problem is None else "[red]UNPROVEN[/]"
        hidden.add_row(c.place, os.path.dirname(c.path), verdict, c.problem or (", ".join(c.seen) if c.seen else "nothing: not there"))
    console.print(hidden)
    weaker = [f"{k} ({protection_state(v)[0]})" for k, v in ex.protections.items() if v is not True]
    if weaker:
        console.print(f"[yellow]protections not held: {', '.join(weaker)}[/]")
    for c in canaries:
        if c.visible:
            typer.echo(f"error: sandboxed code can see {c.path} ({c.place}: {', '.join(c.seen)})", err=True)
        elif c.problem:
            typer.echo(f"error: could not check {c.path} ({c.place}): {c.problem}", err=True)
    raise typer.Exit(1 if failed else 0)
