"""`codea1 eval code|tests|mutants`: thin commands over `codea1.eval`'s library API."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


# data_source names of the benchmarks in the paper's tables (the Code-A1 validation file)
PAPER_NAMES = {"humanevalplus": "HumanEval+", "mbppplus": "MBPP+", "bigcodebench": "BigCodeBench"}


def _table(title: str, sources: dict, columns: list[str]):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("source")
    for col in columns:
        table.add_column(col, justify="right")
    for source, row in sources.items():
        if source in PAPER_NAMES:
            source = f"{PAPER_NAMES[source]} ({source})"
        cells = []
        for col in columns:
            value = row.get(col)
            cells.append("-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value))
        table.add_row(source, *cells)
    return table


def _report_skips(console, summary: dict) -> None:
    skipped = summary.get("skipped", [])
    if skipped:
        console.print(f"[yellow]{len(skipped)} problem(s) skipped (not counted as failures):[/yellow]")
        for item in skipped:
            console.print(f"  {item['id']}: {item['reason']}")
    if summary.get("pending"):
        console.print(f"[yellow]{len(summary['pending'])} problem(s) still pending; run the same command again to resume[/yellow]")


@app.command("code")
def code_command(
    model: str = typer.Option(..., "--model", help="Model name/path, or a training run / checkpoint directory."),
    data: str = typer.Option(..., "--data", help="Problem file in any supported format, or 'bundled[:split]'."),
    out: Path = typer.Option(..., "--out", help="Output directory (samples.jsonl, summary.json); resumes if it exists."),
    n: int = typer.Option(32, "--n", help="Samples per problem."),
    temperature: float = typer.Option(0.7, "--temperature"),
    top_p: float = typer.Option(0.95, "--top-p"),
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first K problems."),
    greedy: bool = typer.Option(False, "--greedy", help="One greedy sample per problem (n=1, temperature 0)."),
    problems_per_batch: int = typer.Option(8, "--problems-per-batch"),
    batch_size: int = typer.Option(64, "--batch-size", help="Sequences decoded together."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Sandbox workers (default: CPU count)."),
    memory_mb: int = typer.Option(4096, "--memory-mb", help="Memory cap of one golden-test run."),
    device: str = typer.Option("auto", "--device"),
    dtype: str = typer.Option("auto", "--dtype", help="auto (bf16 where supported), bfloat16, float16, float32."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for the model (default: torch's)."),
) -> None:
    """Unbiased pass@k and avg@n of a code model on the problems' golden tests."""
    from rich.console import Console

    from codea1.eval.code import CodeEvalConfig, evaluate_code

    console = Console(soft_wrap=True)
    try:
        config = CodeEvalConfig(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                greedy=greedy, limit=limit, problems_per_batch=problems_per_batch,
                                batch_size=batch_size, workers=workers, memory_mb=memory_mb, device=device, dtype=dtype,
                                threads=threads)

        def progress(done: int, total: int, summary: dict) -> None:
            row = summary["sources"].get("all", {})
            console.print(f"[{done}/{total}] pass@1 so far {row.get('pass@1', 0.0):.2f}")

        summary = evaluate_code(model, data, out, config, on_progress=progress)
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    columns = ["problems"] + [f"pass@{k}" for k in summary["ks"]] + [
        next((c for c in next(iter(summary["sources"].values()), {}) if c.startswith("avg@")), "avg@n")]
    console.print(_table(f"eval code: {model} on {data}", summary["sources"], columns))
    _report_skips(console, summary)
    console.print(f"wrote {Path(out) / 'summary.json'} and {Path(out) / 'samples.jsonl'}")


@app.command("tests")
def tests_command(
    model: str = typer.Option(..., "--model", help="Model name/path, or a training run / checkpoint directory."),
    data: str = typer.Option(..., "--data", help="Problem file (bundled, MBPP+ rows, UnLeakedTestBench JSON, ...)."),
    out: Path = typer.Option(..., "--out", help="Output directory; resumes if it exists."),
    k: int = typer.Option(5, "--k", help="Tests per function."),
    temperature: float = typer.Option(0.0, "--temperature", help="0: greedy."),
    top_p: float = typer.Option(1.0, "--top-p"),
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens"),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first K functions."),
    black_box: bool = typer.Option(False, "--black-box", help="Do not show the function's code to the model."),
    problems_per_batch: int = typer.Option(8, "--problems-per-batch"),
    workers: Optional[int] = typer.Option(None, "--workers", help="Sandbox workers (default: CPU count)."),
    device: str = typer.Option("auto", "--device"),
    dtype: str = typer.Option("auto", "--dtype", help="auto (bf16 where supported), bfloat16, float16, float32."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for the model (default: torch's)."),
) -> None:
    """pass@k, mut@k and Mul of a test model (UnLeakedTestBench style)."""
    from rich.console import Console

    from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests

    console = Console(soft_wrap=True)
    try:
        config = TestEvalConfig(k=k, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                limit=limit, white_box=not black_box, problems_per_batch=problems_per_batch, workers=workers, device=device, dtype=dtype,
                                threads=threads)

        def progress(done: int, total: int, summary: dict) -> None:
            row = summary["sources"].get("all", {})
            console.print(f"[{done}/{total}] pass@{k} {row.get(f'pass@{k}', 0.0):.2f}  "
                          f"mut@{k} {row.get(f'mut@{k}', 0.0):.2f}")

        summary = evaluate_tests(model, data, out, config, on_progress=progress)
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    columns = ["functions", f"pass@{k}", f"mut@{k}", "Mul", "mutants", "killed", "equivalent_looking"]
    console.print(_table(f"eval tests: {model} on {data}", summary["sources"], columns))
    _report_skips(console, summary)
    console.print(f"wrote {Path(out) / 'summary.json'} and {Path(out) / 'samples.jsonl'}")


@app.command("mutants")
def mutants_command(
    file: Path = typer.Argument(..., help="A Python file to mutate."),
    show: bool = typer.Option(False, "--show", help="Print every mutant's program."),
) -> None:
    """List the deduplicated mutants of a Python file (the ones mut@k is computed on)."""
    from collections import Counter

    from rich.console import Console

    from codea1.eval.mutation import generate_mutants

    console = Console(soft_wrap=True)
    try:
        mutants = generate_mutants(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        console.print(f"[red]error:[/red] {file}: {exc}")
        raise typer.Exit(2) from exc
    for m in mutants:
        console.print(f"#{m.index:<4} {m.family:<20} {m.description}", markup=False)
        if show:
            console.print(m.source, markup=False)
    counts = Counter(m.family for m in mutants)
    console.print(f"{len(mutants)} mutants: " + ", ".join(f"{f} {c}" for f, c in counts.most_common()))
