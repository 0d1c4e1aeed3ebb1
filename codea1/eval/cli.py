"""`codea1 eval code|tests|mutants`: thin commands over `codea1.eval`'s library API."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from codea1.cli_options import (
    DEVICE_OPTION,
    DTYPE_OPTION,
    ENGINE_OPTION,
    JSON_OPTION,
    LIMIT_OPTION,
    MAX_NEW_TOKENS_OPTION,
    MEMORY_MB_OPTION,
    MODEL_OPTION,
    PROBLEMS_HELP,
    PROBLEMS_PER_BATCH_OPTION,
    SEED_OPTION,
    STDIN_MAX_OUTPUT_MB_OPTION,
    STDIN_TIME_SCALE_OPTION,
    STOP_OPTION,
    TEMPERATURE_HELP,
    THREADS_OPTION,
    TOP_P_HELP,
    WORKERS_OPTION,
    check_output_dir,
)
from codea1.configs import MAX_TEMPERATURE
from codea1.sandbox.support import require as require_sandbox

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


# data_source names of the benchmarks in the paper's tables (the Code-A1 validation file)
PAPER_NAMES = {"humanevalplus": "HumanEval+", "mbppplus": "MBPP+", "bigcodebench": "BigCodeBench"}


def check_engine_here(engine: str, device: str) -> None:
    """An engine that cannot run on this machine is one clear line before anything is loaded."""
    if engine != "auto":
        from codea1.engines import resolve_engine
        from codea1.models import resolve_device

        resolve_engine(engine, resolve_device(device), setting="--engine {}")


def _table(title: str, sources: dict, columns: list[str], headers: dict[str, str] | None = None):
    """A table of `sources`' rows (`headers`: a column's title where it is not its key)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("source")
    for col in columns:
        table.add_column((headers or {}).get(col, col), justify="right")
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


MUTATION_STYLE_OPTION = typer.Option(
    "text", "--mutation-style",
    help="text: Cosmic-Ray's token edits (new operator's precedence, syntax-error mutants killed); "
         "tree: codea1's AST edits keeping the written grouping.")
DEDUPE_MUTANTS_OPTION = typer.Option(
    False, "--dedupe-mutants", help="Count mutations giving the same program once (Cosmic-Ray counts each).")

OUT_HELP = "Output directory (samples.jsonl, summary.json); an existing one is resumed."


def _written(console, out: Path) -> None:
    """Name the files this evaluation's directory holds (never one it did not write)."""
    from codea1.eval.store import SAMPLES_FILE, SUMMARY_FILE

    files = [str(out / name) for name in (SUMMARY_FILE, SAMPLES_FILE) if (out / name).is_file()]
    console.print("wrote " + " and ".join(files), markup=False)


def check_greedy(ctx: typer.Context, greedy: bool, n: int, temperature: float) -> None:
    """Refuse --greedy with an --n or --temperature given that it would override (it samples
    once a problem at temperature 0); one given at that same value is taken."""
    if not greedy:
        return

    def given(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    clashes = [f"--{name} {value:g}" for name, value, implied in (("n", n, 1), ("temperature", temperature, 0.0))
               if given(name) and value != implied]
    if clashes:
        verb = "contradicts" if len(clashes) == 1 else "contradict"
        raise typer.BadParameter(f"{' and '.join(clashes)} {verb} --greedy, which takes one sample a problem at "
                                 "temperature 0 (--n 1 --temperature 0); drop one or the other",
                                 param_hint="--greedy")


@app.command("code")
def code_command(
    ctx: typer.Context,
    model: str = MODEL_OPTION,
    data: str = typer.Option(..., "--data", help=PROBLEMS_HELP),
    out: Path = typer.Option(..., "--out", help=OUT_HELP),
    n: int = typer.Option(32, "--n", min=1, help="Samples per problem (pass@k is reported for k up to n)."),
    temperature: float = typer.Option(0.7, "--temperature", min=0.0, max=MAX_TEMPERATURE, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(0.95, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    max_new_tokens: int = MAX_NEW_TOKENS_OPTION,
    stop: Optional[list[str]] = STOP_OPTION,
    seed: int = SEED_OPTION,
    limit: Optional[int] = LIMIT_OPTION,
    greedy: bool = typer.Option(False, "--greedy", help="One greedy sample per problem (n=1, temperature 0)."),
    problems_per_batch: int = PROBLEMS_PER_BATCH_OPTION,
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Sequences decoded together."),
    workers: Optional[int] = WORKERS_OPTION,
    memory_mb: int = MEMORY_MB_OPTION,
    stdin_time_scale: float = STDIN_TIME_SCALE_OPTION,
    stdin_max_output_mb: float = STDIN_MAX_OUTPUT_MB_OPTION,
    device: str = DEVICE_OPTION,
    dtype: str = DTYPE_OPTION,
    threads: Optional[int] = THREADS_OPTION,
    engine: str = ENGINE_OPTION,
) -> None:
    """Unbiased pass@k and avg@n of a code model on the problems' golden tests."""
    check_greedy(ctx, greedy, n, temperature)
    require_sandbox("codea1 eval code")
    from rich.console import Console

    from codea1.eval.code import CodeEvalConfig, evaluate_code
    from codea1.eval.store import removed_if_failed

    check_output_dir(out, "--out")
    check_engine_here(engine, device)
    console = Console(soft_wrap=True)
    config = CodeEvalConfig(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                            stop=stop or [], greedy=greedy, limit=limit, problems_per_batch=problems_per_batch, seed=seed,
                            batch_size=batch_size, workers=workers, memory_mb=memory_mb, device=device, dtype=dtype,
                            threads=threads, engine=engine, stdin_time_scale=stdin_time_scale,
                            stdin_max_output_mb=stdin_max_output_mb)

    def progress(done: int, total: int, summary: dict) -> None:
        row = summary["sources"].get("all", {})
        console.print(f"[{done}/{total}] pass@1 so far {row.get('pass@1', 0.0):.2f}")

    with removed_if_failed(out):
        summary = evaluate_code(model, data, out, config, on_progress=progress)
    columns = ["problems"] + [f"pass@{k}" for k in summary["ks"]] + [
        next((c for c in next(iter(summary["sources"].values()), {}) if c.startswith("avg@")), "avg@n")]
    console.print(_table(f"eval code: {model} on {data}", summary["sources"], columns))
    _report_skips(console, summary)
    _written(console, out)


@app.command("tests")
def tests_command(
    model: str = MODEL_OPTION,
    data: str = typer.Option(..., "--data", help=PROBLEMS_HELP),
    out: Path = typer.Option(..., "--out", help=OUT_HELP),
    k: int = typer.Option(5, "--k", min=1, help="Tests per function or stdin program (pass@k, mut@k)."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, max=MAX_TEMPERATURE, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(1.0, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    max_new_tokens: int = MAX_NEW_TOKENS_OPTION,
    seed: int = SEED_OPTION,
    limit: Optional[int] = LIMIT_OPTION,
    black_box: bool = typer.Option(False, "--black-box", help="Do not show the function's code to the model."),
    problems_per_batch: int = PROBLEMS_PER_BATCH_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    stdin_time_scale: float = STDIN_TIME_SCALE_OPTION,
    stdin_max_output_mb: float = STDIN_MAX_OUTPUT_MB_OPTION,
    device: str = DEVICE_OPTION,
    dtype: str = DTYPE_OPTION,
    threads: Optional[int] = THREADS_OPTION,
    engine: str = ENGINE_OPTION,
    mutation_style: str = MUTATION_STYLE_OPTION,
    dedupe_mutants: bool = DEDUPE_MUTANTS_OPTION,
    header: str = typer.Option(
        "auto", "--header",
        help="auto: UnLeakedTestBench's import header before its problems' code; ult: before every problem's; none."),
    protocol: str = typer.Option(
        "answer", "--protocol",
        help="answer: one completion holding the k tests (codea1's test prompt); rounds: k chat rounds of one "
             "pytest test method each, as the Code-A1 authors' UnLeakedTestBench harness asks (function problems)."),
) -> None:
    """pass@k, mut@k and Mul of a test model, as UnLeakedTestBench computes them
    (codea1's all-function figures beside them as mut@k_all, Mul_all)."""
    require_sandbox("codea1 eval tests")
    from rich.console import Console

    from codea1.eval.store import removed_if_failed
    from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests

    check_output_dir(out, "--out")
    check_engine_here(engine, device)
    console = Console(soft_wrap=True)
    config = TestEvalConfig(k=k, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed,
                            limit=limit, white_box=not black_box, problems_per_batch=problems_per_batch,
                            workers=workers, device=device, dtype=dtype, threads=threads, engine=engine,
                            mutation_style=mutation_style, dedupe_mutants=dedupe_mutants, header=header,
                            protocol=protocol, stdin_time_scale=stdin_time_scale,
                            stdin_max_output_mb=stdin_max_output_mb)

    def progress(done: int, total: int, summary: dict) -> None:
        row = summary["sources"].get("all", {})
        mut = row.get(f"mut@{k}")
        console.print(f"[{done}/{total}] pass@{k} {row.get(f'pass@{k}', 0.0):.2f}  "
                      f"mut@{k} {'-' if mut is None else f'{mut:.2f}'} over {row.get(f'mut@{k}_tasks', 0)} "
                      f"{summary['scored']}  mut@{k}_all {row.get(f'mut@{k}_all', 0.0):.2f}")

    with removed_if_failed(out):
        summary = evaluate_tests(model, data, out, config, on_progress=progress)
    scored = summary["scored"]   # functions, programs (stdin problems), or problems (both)
    columns = ["functions", f"pass@{k}", f"mut@{k}", f"mut@{k}_tasks", "Mul", f"LineCov@{k}", f"mut@{k}_all",
               "Mul_all", "mutants", "killed", "equivalent_looking"]
    console.print(_table(f"eval tests: {model} on {data}", summary["sources"], columns, {"functions": scored}))
    console.print(f"mut@{k}, Mul: UnLeakedTestBench's ({scored} whose {k} tests all pass, counted in "
                  f"mut@{k}_tasks); mut@{k}_all, Mul_all: every {scored[:-1]}, scored by its passing tests",
                  markup=False)
    _report_skips(console, summary)
    _written(console, out)


@app.command("mutants")
def mutants_command(
    file: Path = typer.Argument(..., metavar="FILE", exists=True, dir_okay=False, help="A Python file to mutate."),
    show: bool = typer.Option(False, "--show", help="Print every mutant's program."),
    mutation_style: str = MUTATION_STYLE_OPTION,
    dedupe_mutants: bool = DEDUPE_MUTANTS_OPTION,
) -> None:
    """List the mutants of a Python file (with the defaults, the ones `eval tests` counts)."""
    from collections import Counter

    from rich.console import Console

    from codea1.eval.mutation import generate_mutants

    console = Console(soft_wrap=True)
    try:
        source = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise typer.BadParameter(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})", param_hint="FILE") from None
    try:
        mutants = generate_mutants(source, style=mutation_style, dedupe=dedupe_mutants)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
    for m in mutants:
        broken = "" if m.compiles else "  (does not compile: killed)"
        console.print(f"#{m.index:<4} {m.family:<20} {m.description}{broken}", markup=False)
        if show:
            console.print(m.source, markup=False)
    counts = Counter(m.family for m in mutants)
    console.print(f"{len(mutants)} mutants: " + ", ".join(f"{f} {c}" for f, c in counts.most_common()))


@app.command("select")
def select_command(
    code_model: Optional[str] = typer.Option(
        None, "--code-model", help="Code model: " + MODEL_OPTION.help.split(": ", 1)[1]
        + " Needed unless --codes-from names the evaluation whose codes are reused."),
    test_model: str = typer.Option(..., "--test-model", help="Test model: " + MODEL_OPTION.help.split(": ", 1)[1]),
    data: str = typer.Option(..., "--data", help=PROBLEMS_HELP),
    out: Path = typer.Option(..., "--out", help="Output directory (codes.jsonl, tests.jsonl, problems.jsonl, "
                                                 "summary.json); an existing one is resumed."),
    n_code: int = typer.Option(4, "--n-code", min=1, help="Candidate codes per problem (N)."),
    n_test: int = typer.Option(2, "--n-test", min=1, help="Generated test suites per problem (K), from the question alone."),
    code_step: Optional[int] = typer.Option(None, "--code-step", min=0, help="Checkpoint step when --code-model is a run (default: the latest)."),
    test_step: Optional[int] = typer.Option(None, "--test-step", min=0, help="Checkpoint step when --test-model is a run (default: the latest)."),
    tests_per_suite: int = typer.Option(8, "--tests-per-suite", min=1, help="Tests the test model is asked for per suite."),
    temperature: float = typer.Option(0.7, "--temperature", min=0.0, max=MAX_TEMPERATURE, help=TEMPERATURE_HELP),
    top_p: float = typer.Option(0.95, "--top-p", min=0.0, max=1.0, help=TOP_P_HELP),
    max_new_tokens: int = MAX_NEW_TOKENS_OPTION,
    seed: int = SEED_OPTION,
    limit: Optional[int] = LIMIT_OPTION,
    problems_per_batch: int = PROBLEMS_PER_BATCH_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
    memory_mb: int = MEMORY_MB_OPTION,
    stdin_time_scale: float = STDIN_TIME_SCALE_OPTION,
    stdin_max_output_mb: float = STDIN_MAX_OUTPUT_MB_OPTION,
    device: str = DEVICE_OPTION,
    dtype: str = DTYPE_OPTION,
    threads: Optional[int] = THREADS_OPTION,
    engine: str = ENGINE_OPTION,
    codes_from: Optional[Path] = typer.Option(
        None, "--codes-from", metavar="DIR",
        help="Judge the candidate codes of an earlier `eval select --out DIR` instead of sampling new ones "
             "(same data, code model and code settings), so that two test models pick among the same codes."),
) -> None:
    """Best-of-N: the test model's tests pick one of the code model's N candidates; pass@1 of the pick
    against a random candidate and the oracle (pass@N)."""
    from rich.console import Console

    from codea1.eval.select import ModelSpec, SelectConfig, evaluate_selection
    from codea1.eval.store import removed_if_failed

    check_output_dir(out, "--out")
    if code_model is None and codes_from is None:
        raise typer.BadParameter("give --code-model, or --codes-from an earlier evaluation", param_hint="--code-model")
    check_engine_here(engine, device)
    console = Console(soft_wrap=True)
    config = SelectConfig(n_code=n_code, n_test=n_test, tests_per_suite=tests_per_suite, temperature=temperature,
                          top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, limit=limit,
                          problems_per_batch=problems_per_batch, workers=workers, memory_mb=memory_mb,
                          device=device, dtype=dtype, threads=threads, engine=engine,
                          stdin_time_scale=stdin_time_scale, stdin_max_output_mb=stdin_max_output_mb)
    with removed_if_failed(out):
        summary = evaluate_selection(None if code_model is None else ModelSpec(code_model, code_step),
                                     ModelSpec(test_model, test_step), data, out, config,
                                     on_message=lambda text: console.print(text, markup=False), codes_from=codes_from)
    columns = ["problems", "selected", "random", "oracle", "gain", "gain_low", "gain_high"]
    console.print(_table(f"eval select: codes {summary['code_model']}, tests {summary['test_model']} on {data} "
                         f"(pass@1 %, N={n_code}, K={n_test}; gain 95% bootstrap interval)",
                         summary["sources"], columns))
    _report_skips(console, summary)
    console.print(f"wrote {out / 'summary.json'} and {out / 'problems.jsonl'}", markup=False)


def _cell(value, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}" if signed else f"{value:.1f}"


def _compare_table(result: dict, comp: dict):
    from rich.table import Table

    a, b = result["evaluations"][0], next(e for e in result["evaluations"] if e["label"] == comp["b"])
    table = Table(title=f"{comp['b']} ({b['models']}) against A ({a['models']}), {result['problems']} paired problems")
    for col in ("metric", "A", comp["b"], f"{comp['b']} - A", "95% interval", "up / down / same", "sign p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for r in comp["metrics"]:
        counts = "-" if r["improved"] is None else f"{r['improved']} / {r['worsened']} / {r['ties']}"
        table.add_row(r["metric"], _cell(r["a"]), _cell(r["b"]), _cell(r["diff"], True),
                      f"[{_cell(r['low'], True)}, {_cell(r['high'], True)}]", counts,
                      "-" if r["p_sign"] is None else f"{r['p_sign']:.3g}", r["verdict"])
    return table


COMPARISON_JSON, COMPARISON_PNG = "comparison.json", "comparison.png"


@app.command("compare")
def compare_command(
    dirs: list[Path] = typer.Argument(..., metavar="DIR DIR [DIR...]",
                                      help="Evaluation directories of one kind and data; each is compared with the first."),
    out: Optional[Path] = typer.Option(None, "--out", help=f"Write the comparison there: {COMPARISON_JSON} (everything, "
                                                          f"per problem too) and {COMPARISON_PNG} (each difference "
                                                          "with its interval)."),
    as_json: bool = JSON_OPTION,
    per_problem: bool = typer.Option(False, "--per-problem", help="Also print every problem whose first metric changed."),
    resamples: int = typer.Option(4000, "--resamples", min=100, help="Bootstrap resamples (seeded: the same figures every time)."),
) -> None:
    """Two or more evaluations per problem side by side: each metric's difference with a paired
    bootstrap 95% interval, problems that changed each way with an exact sign (McNemar) test, a verdict
    and the smallest difference this many problems could detect."""
    import json

    from rich.console import Console

    from codea1.eval.compare import compare, finite, plot_comparison
    from codea1.eval.store import write_json

    if out is not None:
        check_output_dir(out, "--out")
    result = finite(compare(dirs, resamples=resamples))
    console = Console(soft_wrap=True)
    if as_json:
        console.print_json(json.dumps(result))
    else:
        _print_comparison(console, result, per_problem)
    if out is not None:
        created = not out.exists()
        out.mkdir(parents=True, exist_ok=True)
        try:
            write_json(out / COMPARISON_JSON, result)
            plot_comparison(result, out / COMPARISON_PNG)
        except BaseException:
            if created:  # (a full disk: no empty --out left behind)
                with contextlib.suppress(OSError):
                    out.rmdir()  # only if nothing landed in it
            raise
        if not as_json:
            console.print(f"wrote {out / COMPARISON_JSON} and {out / COMPARISON_PNG}", markup=False)


def _print_comparison(console, result: dict, per_problem: bool) -> None:
    from codea1.eval.compare import headline

    for e in result["evaluations"]:
        console.print(f"{e['label']}: {e['dir']} ({e['models']})", markup=False, highlight=False)
    for label, ids in result["unpaired"].items():
        console.print(f"{label}: {len(ids)} problem(s) not in every directory, left out: {', '.join(ids[:5])}"
                      f"{' ...' if len(ids) > 5 else ''}", markup=False)
    for comp in result["comparisons"]:
        console.print(_compare_table(result, comp))
        if comp["same_candidates"] is not None:
            console.print(f"candidate codes: {'the same' if comp['same_candidates'] else 'different'} in A and "
                          f"{comp['b']}", markup=False)
        if per_problem:
            name = comp["metrics"][0]["metric"]
            for pid, sides in result["per_problem"].items():
                va, vb = sides["A"].get(name), sides[comp["b"]].get(name)
                if va != vb:
                    console.print(f"  {pid}: {name} {_cell(va)} -> {_cell(vb)}", markup=False, highlight=False)
    for line in headline(result):
        console.print(line, markup=False, highlight=False)
