"""`codea1 data check` and `codea1 data convert`, and the library check behind them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from codea1.data import Problem, bundled_problems, load_problems, save_problems
from codea1.data.check import check_problems
from codea1.cli import app
from codea1.sandbox import Limits

runner = CliRunner()


def _set(tmp_path):
    good = bundled_problems()[0]
    problems = [
        good,
        Problem(id="bad/wrong-test", question="def inc(x):", entry_point="inc",
                reference="def inc(x):\n    return x + 1\n", tests=["assert inc(1) == 2", "assert inc(1) == 3"]),
        Problem(id="bad/import", question="def f():", entry_point="f",
                reference="import not_a_module_anywhere\ndef f():\n    return 1\n"),
        Problem(id="bad/name", question="def f():", entry_point="f", reference="def g():\n    return 1\n"),
        Problem(id="bad/program", question="def h():", entry_point="h", reference="def h():\n    return 1\n",
                test_program="assert h() == 2, 'h must be 2'\n"),
        Problem(id="bad/hangs", question="def k():", entry_point="k",
                reference="def k():\n    while True:\n        pass\n", tests=["assert k() == 1"]),
        Problem(id="ok/program", question="def h():", entry_point="h", reference="def h():\n    return 2\n",
                test_program="assert h() == 2\n"),
    ]
    path = tmp_path / "set.jsonl"
    save_problems(problems, path)
    return path


def test_check_problems_names_each_kind_of_breakage(tmp_path):
    problems = load_problems(_set(tmp_path))
    results = {r.id: r for r in check_problems(problems, limits=Limits(timeout_s=20.0, call_timeout_s=0.5), workers=2)}
    assert results[problems[0].id].ok and results["ok/program"].ok
    assert results["bad/wrong-test"].status == "broken"
    assert results["bad/wrong-test"].reasons == ["golden test 1 fails (AssertionError): assert inc(1) == 3"]
    assert "ModuleNotFoundError" in results["bad/import"].reasons[0]
    assert results["bad/name"].reasons == ["the reference does not define function 'f'"]
    assert results["bad/hangs"].reasons == ["golden test 0 fails (timed out): assert k() == 1"]
    reasons = results["bad/program"].reasons
    assert len(reasons) == 1 and "test program failed" in reasons[0] and "h must be 2" in reasons[0]


def test_cli_check_reports_broken_rows_and_exits_1(tmp_path):
    result = runner.invoke(app, ["data", "check", str(_set(tmp_path)), "--workers", "2", "--call-timeout", "0.5"])
    assert result.exit_code == 1, result.output
    for pid in ("bad/wrong-test", "bad/import", "bad/name", "bad/hangs", "bad/program"):
        assert f"BROKEN    {pid}:" in result.output
    assert "2/7 problems ok, 5 broken or unchecked" in result.output


def test_cli_check_json_and_clean_exit(tmp_path):
    path = tmp_path / "ok.jsonl"
    save_problems(bundled_problems()[:3], path)
    result = runner.invoke(app, ["data", "check", str(path), "--json", "--workers", "2"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["status"] for r in lines] == ["ok", "ok", "ok"]


def test_cli_check_says_which_ok_problems_have_no_golden_test(tmp_path):
    """A problem with neither asserts nor a test program passes the check on its reference
    alone: the summary names it (validation and `eval code` skip it), and --json counts
    every problem's golden tests."""
    good = bundled_problems("train")[:2]
    bare = Problem(id="bare/1", question=good[0].question, entry_point=good[0].entry_point,
                   reference=good[0].reference)
    path = tmp_path / "p.jsonl"
    save_problems([bare, *good], path)
    result = runner.invoke(app, ["data", "check", str(path), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "3/3 problems ok, 0 broken or unchecked; 1 of the ok ones with no golden test" in result.output
    assert result.output.rstrip().split(": ")[-1].startswith("bare/1 (")
    rows = [json.loads(x) for x in runner.invoke(app, ["data", "check", str(path), "--json", "--workers", "1"])
            .stdout.splitlines() if x.startswith("{")]
    assert [r["golden_tests"] for r in rows] == [0, *(len(p.tests) + bool(p.test_program) for p in good)]
    assert rows[1]["golden_tests"] > 0
    clean = runner.invoke(app, ["data", "check", "bundled:demo", "--workers", "1"])
    assert "golden test" not in clean.output


def test_cli_check_bad_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"id": "x"}\n')
    result = runner.invoke(app, ["data", "check", str(path)])
    assert result.exit_code == 2
    assert "broken.jsonl, row 1" in result.output and "expected the columns of a known format" in result.stderr


def test_cli_convert_writes_project_jsonl(tmp_path):
    out = tmp_path / "bundled.jsonl"
    result = runner.invoke(app, ["data", "convert", "bundled", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {len(bundled_problems())} problems" in result.output
    assert load_problems(out, fmt="project") == bundled_problems()

    rows = [{"task_id": 1, "func_name": "f", "prompt": "One.", "code": "def f():\n    return 1\n",
             "test_list": ["assert f() == 1"]}]
    src = tmp_path / "u.json"
    src.write_text(json.dumps(rows))
    out2 = tmp_path / "u.jsonl"
    result = runner.invoke(app, ["data", "convert", str(src), str(out2), "--format", "unleaked"])
    assert result.exit_code == 0, result.output
    [p] = load_problems(out2)
    assert (p.id, p.tests, p.source) == ("1", ["assert f() == 1"], "unleakedtestbench")


def test_cli_reads_the_bundled_splits_by_name(tmp_path):
    for spec, split in (("bundled:heldout", "heldout"), ("bundled:train", "train")):
        out = tmp_path / f"{split}.jsonl"
        result = runner.invoke(app, ["data", "convert", spec, str(out)])
        assert result.exit_code == 0, result.output
        assert load_problems(out, fmt="project") == bundled_problems(split)
    result = runner.invoke(app, ["data", "convert", "bundled:test", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert "unknown bundled split 'test'" in result.output and not (tmp_path / "x.jsonl").exists()


# ------------------------------------------------------------------ the paper's files

def test_data_check_passes_on_humaneval_plus_style_rows(tmp_path):
    """The reference validation file's HumanEval+ shape (GT_code a body, check(candidate))."""
    from paper_rows import HUMANEVAL_STYLE_ROWS, MBPP_STYLE_ROW, training_file, validation_file, write_parquet

    good = write_parquet(tmp_path / "good.parquet", HUMANEVAL_STYLE_ROWS[:2] + [MBPP_STYLE_ROW])
    result = runner.invoke(app, ["data", "check", str(good), "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "3/3 problems ok" in result.output
    # a row whose reference really fails its tests is named by id, and only that one
    result = runner.invoke(app, ["data", "check", str(validation_file(tmp_path / "val.parquet")), "--workers", "2"])
    assert result.exit_code == 1
    broken = [line for line in result.output.splitlines() if line.startswith("BROKEN")]
    assert len(broken) == 1 and "HumanEvalStyle/2" in broken[0] and "AssertionError" in broken[0]
    assert "3/4 problems ok" in result.output
    # the training file's shape (KodCode-style rows, pytest tests)
    result = runner.invoke(app, ["data", "check", str(training_file(tmp_path / "train.parquet")), "--workers", "2"])
    assert result.exit_code == 0, result.output


def _stdin(pid, reference, *, tests=(("1\n", "1\n"),), **fields):
    from codea1.data.stdin_io import io_test

    return Problem(id=pid, question="echo", entry_point="", reference=reference,
                   tests=[io_test(i, o) for i, o in tests], kind="stdin", **fields)


def test_stdin_check_uses_the_judges_time_limit_per_input():
    """A stdin reference gets the training judge's time per input (`meta.time_limit_s`,
    else the call timeout: `--call-timeout`, `judge.call_timeout_s`), so `data check`
    passes only what training's reference runs pass. Before: min(timeout, 2 x 5 s), so a
    reference that slept past the call timeout passed and then timed out in training."""
    slow = "import time\ntime.sleep(1.5)\nprint(input())\n"
    problems = [_stdin("slow", slow), _stdin("slow/limited", slow, meta={"time_limit_s": 4})]
    results = check_problems(problems, limits=Limits(timeout_s=10.0, call_timeout_s=0.5), workers=2)
    assert results[0].status == "broken" and "golden test 0 fails (timeout" in results[0].reasons[0]
    assert results[1].ok, results[1].reasons


def test_data_check_runs_the_reference_after_the_problems_imports():
    """The judge and `eval code` run a function problem's reference after its `imports`;
    so does the data check. Before: NameError 'List', the row BROKEN (and refused by
    data.check=refuse) though training passes it."""
    problem = Problem(id="typed", question="def f(x: List[int]) -> int:", entry_point="f",
                      reference="def f(x: List[int]) -> int:\n    return len(x)\n",
                      tests=["assert f([1, 2]) == 2"], imports="from typing import List")
    [result] = check_problems([problem], limits=Limits(timeout_s=10.0), workers=1)
    assert result.ok, result.reasons


def test_a_function_problem_without_a_reference_is_named_so():
    """LiveCodeBench functional and solution-less TACO call-based rows have no reference:
    the same reason as stdin rows get, not the NameError of running nothing."""
    problem = Problem(id="lcb/f", question="def f(x):", entry_point="f", reference="", tests=["assert f(1) == 1"],
                      meta={"no_reference": True})
    [result] = check_problems([problem], limits=Limits(timeout_s=10.0), workers=1)
    assert result.status == "broken" and result.reasons == [
        "no reference solution (meta.no_reference): for evaluation, not training"]


def test_stdin_checker_runs_as_the_judge_runs_it():
    """The checker runs in the judge's checker job (its prints discarded, each call
    isolated): one that prints 40 KB a call passes a right reference, as `eval code`
    does. A checker that does not run is named as such. Before: the output cap failed
    the reference, and a broken checker read "golden test 0 fails (prints '1', expected
    '1')"."""
    chatty = "def check(inp, exp, out):\n    print('x' * 40000)\n    return sorted(out.split()) == sorted(exp.split())\n"
    swap = "a, b = input().split()\nprint(b, a)\n"
    problems = [
        _stdin("chatty", swap, tests=[(f"{i} {i + 1}\n", f"{i} {i + 1}\n") for i in range(4)],
               meta={"checker": chatty}),
        _stdin("no-check", "print(input())\n", meta={"checker": "x = 1\n"}),
        _stdin("syntax", "print(input())\n", meta={"checker": "def check(i, e, o):\n    return o == e(\n"}),
    ]
    chatty_r, no_check, syntax = check_problems(problems, limits=Limits(timeout_s=10.0, call_timeout_s=3.0), workers=2)
    assert chatty_r.ok, chatty_r.reasons
    assert no_check.status == "broken" and no_check.reasons[0].startswith("meta.checker fails on golden test 0")
    assert "check" in no_check.reasons[0]
    assert syntax.status == "broken" and syntax.reasons[0].startswith("meta.checker fails: ")
    assert "SyntaxError" in syntax.reasons[0]


def test_the_data_checks_stdin_limits_are_the_judges():
    """`codea1 data check` runs a stdin reference under `stdin_io.run_limits`, which the
    judge's `judge.golden.stdin_limits` calls (at the default time scale): the same limits."""
    from codea1.data.stdin_io import run_limits
    from codea1.judge.golden import stdin_limits

    for meta in ({}, {"time_limit_s": 0.01}, {"time_limit_s": 2.5}, {"time_limit_s": 99}):
        for limits in (Limits(), Limits(timeout_s=10.0, call_timeout_s=0.5), Limits(timeout_s=1.0, call_timeout_s=3.0)):
            problem = _stdin("p", "print(input())\n", meta=meta)
            assert run_limits(problem, limits) == stdin_limits(problem, limits)
