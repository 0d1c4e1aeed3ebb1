"""`codea1 judge`: judge one code and one test suite on one problem, to debug a reward.

The command runs the same `Judge` as training (one candidate, one suite, optional
Mistake Book tests) and shows every test with its normalized form, validity, reason and
outcome, and every intermediate score of the reward formulas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from codea1.cli_options import JSON_OPTION
from codea1.sandbox.support import require as require_sandbox

__all__ = ["judge_command", "judgement_record", "load_problem_file"]


def load_problem_file(path: Path) -> Any:
    """One problem in the project's JSONL schema: a JSON object (or a one-line JSONL file)."""
    from codea1.data import Problem

    text = _read(path, "--problem")
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        row = json.loads(text)
    except json.JSONDecodeError as err:
        if len(lines) > 1:
            raise typer.BadParameter(
                f"{path}: expected one problem (a JSON object), found {len(lines)} lines; "
                "put the problem to judge in a file of its own",
                param_hint="--problem",
            ) from err
        raise typer.BadParameter(f"{path}: not JSON ({err.msg} at line {err.lineno})", param_hint="--problem") from err
    try:
        return Problem.from_dict(row, where=str(path))
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--problem") from err


def _read(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise typer.BadParameter(f"{path}: cannot read ({err.strerror})", param_hint=option) from err
    except UnicodeDecodeError as err:
        raise typer.BadParameter(f"{path}: not UTF-8 text ({err.reason})", param_hint=option) from err


def judgement_record(judgement: Any) -> dict[str, Any]:
    """The JSON object of `codea1 judge --json` for a one-candidate, one-suite judgement."""
    suite = judgement.suites[0][0]
    valid_code = judgement.code_valid[0]
    return {
        "problem_id": judgement.problem_id,
        "code_valid": valid_code,
        "code_error": judgement.code_errors[0],
        "code_reward": judgement.code_rewards[0],
        "test_reward": judgement.test_rewards[0][0],
        "valid_ratio": suite.valid_ratio,
        "valid": suite.valid,
        "invalid": suite.invalid,
        "invalid_kinds": suite.invalid_kinds,
        "gen_pass_rate": suite.gen_pass_rate,
        "gen_fail_rate": suite.gen_fail_rate,
        "mb_pass_rate": suite.mb_pass_rate,
        "pass_score": suite.pass_score,
        "attack": suite.attack,
        "nonprintable": suite.nonprintable,
        "tests": [
            {
                "source": t.source,
                "normalized": t.normalized,
                "valid": t.valid,
                "reason": t.reason,
                "passed": t.passed if t.valid else None,
                "kind": t.kind,
                "used": t.used,
                # a wrong-expectation test still runs in its corrected form and counts in the rates
                "used_passed": t.passed if t.used else None,
                "failure": t.failure,
            }
            for t in suite.tests
        ],
        "mistakes": [
            {"test": test, "passed": ok}
            for test, ok in zip(judgement.mistakes, judgement.mistakes_passed[0] or [None] * len(judgement.mistakes))
        ],
        "error": judgement.infra_error or judgement.reference_error,
    }


# The judge's word for a test whose expected value was wrong: it still runs, on the
# reference solution's value (`assert CALL == <reference value>`).
REWRITTEN_NOTE = (
    "rewritten: the test's expected value was wrong, so it ran as `assert CALL == <the reference "
    "solution's value>`; it counts as invalid (wrong expectation) and, as in the Code-A1 reference, "
    "also as valid in the valid ratio, and its result counts in the pass rate.")


def _test_status(test: dict[str, Any]) -> str:
    """The 'test' column: kept as written, kept rewritten, or why it was dropped."""
    if test["valid"]:
        return "[green]kept[/green]"
    if test["used"]:
        return "[yellow]rewritten[/yellow]"
    return f"[red]dropped[/red] ({test['kind']})" if test["kind"] else "[red]dropped[/red]"


def _print_table(record: dict[str, Any], suite_size: int) -> None:
    """The record for people: a test or Mistake Book line shows 200 characters of a long
    value and its length (`shortened`); `--json` keeps every text whole."""
    from rich.console import Console
    from rich.table import Table

    from codea1.judge.parse import shortened

    console = Console()
    code = "[green]valid[/green]" if record["code_valid"] else f"[red]invalid[/red] ({record['code_error']})"
    console.print(f"[bold]{record['problem_id']}[/bold]  code: {code}")
    console.print(
        f"code reward [bold]{record['code_reward']:.4f}[/bold]   test reward [bold]{record['test_reward']:.4f}[/bold]")
    tests = record["tests"]
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted((record["invalid_kinds"] or {}).items()))
    both = record["valid"] + record["invalid"] - len(tests)  # rewritten tests counted on both sides
    counted = f"{len(tests)} tests: {record['valid']} count as valid, {record['invalid']} as invalid"
    counted += f" ({kinds})" if kinds else ""
    counted += f"; {both} rewritten test{'s' if both != 1 else ''} counted as both" if both > 0 else ""
    g, valid, invalid = suite_size, record["valid"], record["invalid"]
    console.print(counted + f"; valid ratio min({valid}/{g}, 1 - {invalid}/{g}) = {record['valid_ratio']:.3f}")
    mb = "none given" if record["mb_pass_rate"] is None else f"{record['mb_pass_rate']:.3f}"
    console.print(
        f"pass rates on the code: its own suite {record['gen_pass_rate']:.3f} (failed {record['gen_fail_rate']:.3f}), "
        f"Mistake Book {mb}; pass score {record['pass_score']:.3f}, attack {record['attack']:.3f}, "
        f"non-printable share {record['nonprintable']:.4f}")
    table = Table("#", "test", "code passed", "why", "test as run")
    for k, t in enumerate(tests, 1):
        passed = t["used_passed"]
        mark = "-" if passed is None else ("[green]yes[/green]" if passed else "[red]no[/red]")
        table.add_row(str(k), _test_status(t), mark,
                      "; ".join(x for x in (t["reason"], t["failure"]) if x), shortened(t["normalized"] or t["source"]))
    console.print(table)
    if any(not t["valid"] and t["used"] for t in tests):
        console.print(REWRITTEN_NOTE)
    if record["mistakes"]:
        mt = Table("code passed", "Mistake Book test")
        for m in record["mistakes"]:
            mt.add_row("-" if m["passed"] is None else ("yes" if m["passed"] else "no"), shortened(m["test"]))
        console.print(mt)
    if record.get("mistakes_skipped"):
        st = Table("line", "why not replayed", "Mistake Book line")
        for m in record["mistakes_skipped"]:
            st.add_row(str(m["line"]), m["reason"], shortened(m["test"]))
        console.print(st)
    if record["error"]:
        console.print(f"[red]not judged:[/red] {record['error']}")


def run_judge_settings(run: Path) -> dict[str, Any]:
    """The judge settings of a training run, from its config.yaml: `JudgeConfig`'s keywords,
    with the run's sandbox limits (`judge.timeout_s`, `call_timeout_s`, `memory_mb`)."""
    from codea1.judge.config import JudgeConfig
    from codea1.train.checkpoint import CONFIG_FILE
    from codea1.train.config import read_run_config

    path = Path(run) / CONFIG_FILE
    if not path.is_file():
        raise typer.BadParameter(f"{run}: no {CONFIG_FILE}; expected a training run directory", param_hint="--run")
    section = read_run_config(path)[0].judge  # (a JudgeConfig with the trainer's keys added)
    return {**section.model_dump(include=set(JudgeConfig.model_fields)), "limits": section.sandbox_limits()}


def judge_command(
    problem: Annotated[Path, typer.Option("--problem", help="One problem in the project's JSONL schema (a JSON object).")],
    code: Annotated[Path, typer.Option("--code", help="Raw code completion (with or without ``` fences).")],
    tests: Annotated[Path, typer.Option("--tests", help="Raw test completion (one suite).")],
    mistakes: Annotated[
        Path | None, typer.Option("--mistakes", help="Mistake Book tests, one `assert ...` a line "
                                  "(lines not replayed are listed, with why).")
    ] = None,
    alpha: Annotated[float | None, typer.Option(
        help="Weight of validity in the test reward (default 0.5, or the --run's).", min=0.0, max=1.0)] = None,
    suite_size: Annotated[int | None, typer.Option(
        help="Nominal suite size G (default 8, the paper's, or the --run's: the cpu-demo trains with 4).",
        min=1)] = None,
    run: Annotated[Path | None, typer.Option(
        "--run", help="A training run directory: judge as it does (its judge.alpha, judge.suite_size, "
        "judge switches and sandbox limits, from its config.yaml), so a sample of its samples.jsonl gets its "
        "reward.")] = None,
    as_json: bool = JSON_OPTION,
) -> None:
    """Judge one code completion against one test completion, showing every step of the reward."""
    require_sandbox("codea1 judge")
    from codea1.judge.judge import Judge, JudgeConfig, ProblemRollout
    from codea1.sandbox import Executor

    settings: dict[str, Any] = {"alpha": 0.5, "suite_size": 8}
    if run is not None:
        settings = run_judge_settings(run)
    settings.update({k: v for k, v in (("alpha", alpha), ("suite_size", suite_size)) if v is not None})
    suite_size = settings["suite_size"]

    prob = load_problem_file(problem)
    code_text = _read(code, "--code")
    test_text = _read(tests, "--tests")
    mb_lines: list[tuple[int, str]] = []  # (line number, test)
    if mistakes is not None:
        mb_lines = [
            (number, line.strip())
            for number, line in enumerate(_read(mistakes, "--mistakes").splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    config = JudgeConfig(**settings)
    mb_tests = [test for _, test in mb_lines]
    with Executor(workers=1, limits=config.limits) as executor:
        judgement = Judge(executor, config).judge(ProblemRollout(prob, [code_text], [[test_text]], mb_tests))
    record = judgement_record(judgement)
    record["mistakes_skipped"] = [  # the judge's reasons, placed on the file's line numbers
        {"line": mb_lines[k][0], "test": mb_lines[k][1], "reason": why} for k, why in judgement.mistakes_skipped
    ]
    if as_json:
        typer.echo(json.dumps(record, ensure_ascii=False))
    else:
        _print_table(record, suite_size)
    if not judgement.usable:
        raise typer.Exit(1)
