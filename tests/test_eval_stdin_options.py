"""`--stdin-time-scale` and `--stdin-max-output-mb`: `codea1 eval code|tests|select` and `codea1
data check` judge stdin programs under the values training takes from `judge.stdin_time_scale`
and `judge.stdin_max_output_mb`. Before, they always used the defaults (1 and 4 MiB), so after a
run changed those keys, validation and `eval code` disagreed on a program that printed between
the two caps. The values are checked up front, recorded in eval_config.json, held on resume and
by `eval compare` (a directory written before them was judged with the defaults). Also: the
`eval tests` table names what it scored (functions, programs, or problems for a mixed set).

The models' samples are scripted (tests/test_stdin_eval.py's); the sandbox runs are real."""

from __future__ import annotations

import json

import pytest
import test_stdin_eval
from typer.testing import CliRunner

from codea1.cli import app
from codea1.data import Problem, save_problems
from codea1.data.stdin_io import io_test
from codea1.judge.golden import StdinSettings

#: tests/test_stdin_eval.py's scripted samples and sandbox, used here too
SCRIPT, scripted, executor = test_stdin_eval.SCRIPT, test_stdin_eval.scripted, test_stdin_eval.executor
WIDE = {"COLUMNS": "250"}
#: prints 2001 bytes on its first golden input
CHATTY = Problem(id="opt/chatty", question="Read n. Print the letter x n times on one line.", entry_point="",
                 reference="print('x' * int(input()))\n",
                 tests=[io_test("2000\n", "x" * 2000 + "\n"), io_test("3\n", "xxx\n")], source="opt", kind="stdin",
                 meta={"time_limit_s": 2.0})
#: takes 0.5 s on an input limited to 0.25 s
SLOW = Problem(id="opt/slow", question="Read a and b. Print a + b.", entry_point="",
               reference="import time\ntime.sleep(0.5)\na, b = map(int, input().split())\nprint(a + b)\n",
               tests=[io_test("1 2\n", "3\n")], source="opt", kind="stdin", meta={"time_limit_s": 0.25})
#: prints 5 MiB: over the default cap (4 MiB), under 8
BIG = Problem(id="opt/big", question="Read n. Print the letter x n times.", entry_point="",
              reference="import sys\nsys.stdout.write('x' * int(input()))\n",
              tests=[io_test(f"{5 << 20}\n", "x" * (5 << 20))], source="opt", kind="stdin", meta={"time_limit_s": 5.0})
SMALL_CAP = 0.001   # MiB: 1048 bytes, under CHATTY's 2001
SUITE = f"```input\n2000\n```\n```output\n{'x' * 2000}\n```\n```input\n3\n```\n```output\nxxx\n```"


def _code(body: str) -> str:
    return f"```python\n{body}```"


@pytest.fixture
def script(monkeypatch):
    for problem in (CHATTY, SLOW):
        monkeypatch.setitem(SCRIPT, ("code", problem.id), [_code(problem.reference)] * 2)
        monkeypatch.setitem(SCRIPT, ("test", problem.id), [SUITE] * 2)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "p.jsonl"
    save_problems([CHATTY, SLOW], path)
    return path


def _skipped(summary: dict) -> dict[str, str]:
    return {s["id"]: s["reason"] for s in summary["skipped"]}


# --- the options reach the judging ------------------------------------------------------------


def test_eval_code_judges_stdin_programs_under_the_options(tmp_path, data, scripted, script, executor):
    """Defaults: SLOW's reference runs out of its 0.25 s (skipped), CHATTY passes. Time scale 4
    gives SLOW 1 s (it passes); a cap of 1048 bytes fails CHATTY's reference (skipped). Before:
    CodeEvalConfig took neither (TypeError), and the judge always used 1 and 4 MiB."""
    from codea1.eval.code import CodeEvalConfig, evaluate_code

    plain = evaluate_code("fake", data, tmp_path / "a", CodeEvalConfig(n=2), executor=executor)
    assert list(_skipped(plain)) == [SLOW.id] and "timeout" in _skipped(plain)[SLOW.id]
    assert plain["sources"]["all"]["pass@1"] == 100.0
    config = CodeEvalConfig(n=2, stdin_time_scale=4, stdin_max_output_mb=SMALL_CAP)
    scaled = evaluate_code("fake", data, tmp_path / "b", config, executor=executor)
    assert list(_skipped(scaled)) == [CHATTY.id] and "over the limit of 1048" in _skipped(scaled)[CHATTY.id]
    assert scaled["sources"]["all"] == {**scaled["sources"]["all"], "problems": 1, "pass@1": 100.0}
    assert scaled["config"]["stdin_time_scale"] == 4 and scaled["config"]["stdin_max_output_mb"] == SMALL_CAP


def test_eval_tests_scores_stdin_tests_under_the_cap(tmp_path, data, scripted, script, executor):
    """CHATTY's first test is valid while the reference may print its 2001 bytes; under a cap
    of 1048 bytes the reference's run fails it. The table's word: programs."""
    from codea1.eval.tests_eval import TestEvalConfig, evaluate_tests

    save_problems([CHATTY], data)
    plain = evaluate_tests("fake", data, tmp_path / "a", TestEvalConfig(k=2), executor=executor)
    capped = evaluate_tests("fake", data, tmp_path / "b", TestEvalConfig(k=2, stdin_max_output_mb=SMALL_CAP),
                            executor=executor)
    rows = [json.loads((tmp_path / d / "samples.jsonl").read_text()) for d in ("a", "b")]
    assert rows[0]["passes"] == [True, True] and rows[1]["passes"] == [False, True]
    assert plain["scored"] == capped["scored"] == "programs"
    # a program's line coverage is not measured: no figure, not a measured 0
    assert plain["sources"]["all"]["LineCov@2"] is None


def test_eval_select_runs_candidates_under_the_options(executor):
    """The candidates' runs on the generated inputs: the cap fails a program printing more,
    the time scale lets a slow one finish (as the training judge runs them)."""
    from codea1.eval.stdin_tests import run_stdin_generated_tests, stdin_generated_tests
    from codea1.sandbox import Limits

    limits = Limits(timeout_s=10.0, call_timeout_s=3.0, memory_mb=1024)
    chatty = stdin_generated_tests([SUITE])
    assert run_stdin_generated_tests(executor, CHATTY, [_code(CHATTY.reference)], chatty, limits)[0].passes == [True, True]
    small = StdinSettings(max_output_bytes=int(SMALL_CAP * 2**20))
    assert run_stdin_generated_tests(executor, CHATTY, [_code(CHATTY.reference)], chatty, limits,
                                     small)[0].passes == [False, True]
    slow = stdin_generated_tests(["```input\n1 2\n```\n```output\n3\n```"])
    assert run_stdin_generated_tests(executor, SLOW, [_code(SLOW.reference)], slow, limits)[0].passes == [False]
    assert run_stdin_generated_tests(executor, SLOW, [_code(SLOW.reference)], slow, limits,
                                     StdinSettings(time_scale=4.0))[0].passes == [True]


def test_eval_select_records_and_judges_with_the_options(tmp_path, data, scripted, script, executor):
    from codea1.eval.select import ModelSpec, SelectConfig, evaluate_selection

    spec, out = ModelSpec("base"), tmp_path / "out"
    config = SelectConfig(n_code=2, n_test=1, bootstrap=100, stdin_time_scale=4, stdin_max_output_mb=SMALL_CAP)
    summary = evaluate_selection(spec, spec, data, out, config, executor=executor)
    assert list(_skipped(summary)) == [CHATTY.id] and summary["sources"]["all"]["selected"] == 100.0
    record = json.loads((out / "eval_config.json").read_text())
    assert (record["stdin_time_scale"], record["stdin_max_output_mb"]) == (4, SMALL_CAP)
    with pytest.raises(ValueError, match=r"stdin_time_scale: 4 on disk vs 1.0 now"):
        evaluate_selection(spec, spec, data, out, SelectConfig(n_code=2, n_test=1, bootstrap=100,
                                                               stdin_max_output_mb=SMALL_CAP), executor=executor)


# --- recorded, held on resume and by eval compare -------------------------------------------


def test_a_resume_with_other_values_is_refused_and_an_older_directory_has_the_defaults(
        tmp_path, data, scripted, script, executor):
    from codea1.eval.code import CodeEvalConfig, evaluate_code
    from codea1.eval.compare import CompareError, compare

    save_problems([CHATTY], data)
    made = {}
    for name, options in (("old", {}), ("new", {}), ("scaled", {"stdin_time_scale": 2.0})):
        made[name] = evaluate_code("fake", data, tmp_path / name, CodeEvalConfig(n=2, **options), executor=executor)
    record = json.loads((tmp_path / "scaled" / "eval_config.json").read_text())
    assert (record["stdin_time_scale"], record["stdin_max_output_mb"]) == (2.0, 4.0)
    with pytest.raises(ValueError, match=r"holds an evaluation with other settings \(stdin_time_scale: 2.0 on disk "
                                         r"vs 1.0 now\)"):
        evaluate_code("fake", data, tmp_path / "scaled", CodeEvalConfig(n=2), executor=executor)
    # a directory written before the values were recorded was judged with the defaults
    run_file = tmp_path / "old" / "eval_config.json"
    old = json.loads(run_file.read_text())
    run_file.write_text(json.dumps({k: v for k, v in old.items() if not k.startswith("stdin_")}))
    assert evaluate_code("fake", data, tmp_path / "old", CodeEvalConfig(n=2), executor=executor)["sources"] \
        == made["old"]["sources"]
    with pytest.raises(ValueError, match=r"stdin_max_output_mb: 4.0 on disk vs 8.0 now"):
        evaluate_code("fake", data, tmp_path / "old", CodeEvalConfig(n=2, stdin_max_output_mb=8.0), executor=executor)
    assert compare([tmp_path / "old", tmp_path / "new"])["problems"] == 1
    with pytest.raises(CompareError, match=r"stdin_time_scale 2.0 vs 1.0"):
        compare([tmp_path / "old", tmp_path / "scaled"])


# --- checked up front -----------------------------------------------------------------------


BAD = [("--stdin-time-scale", "0"), ("--stdin-time-scale", "-1"), ("--stdin-time-scale", "nan"),
       ("--stdin-time-scale", "inf"), ("--stdin-max-output-mb", "0"), ("--stdin-max-output-mb", "65"),
       ("--stdin-max-output-mb", "inf")]


@pytest.mark.parametrize("option,value", BAD)
@pytest.mark.parametrize("command", ["code", "tests", "select", "data check"])
def test_the_commands_refuse_a_bad_value_before_anything_is_created(tmp_path, command, option, value):
    out = tmp_path / "out"
    args = (["data", "check", "bundled-stdin:demo"] if command == "data check" else
            ["eval", command, "--data", "bundled-stdin:demo", "--out", str(out)]
            + (["--code-model", "m", "--test-model", "m"] if command == "select" else ["--model", "m"]))
    result = CliRunner().invoke(app, [*args, option, value], env=WIDE)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize("options,said", [
    ({"stdin_time_scale": 0}, "--stdin-time-scale 0: Input should be greater than 0"),
    ({"stdin_time_scale": float("nan")}, "--stdin-time-scale must be a positive, finite number, got nan"),
    ({"stdin_time_scale": float("inf")}, "--stdin-time-scale must be a positive, finite number, got inf"),
    ({"stdin_time_scale": True}, "--stdin-time-scale must be a positive, finite number, got True"),
    ({"stdin_max_output_mb": 100}, "--stdin-max-output-mb 100: Input should be less than or equal to 64"),
])
def test_the_eval_configs_refuse_a_bad_value_naming_the_option(options, said):
    from codea1.eval.code import CodeEvalConfig
    from codea1.eval.select import SelectConfig
    from codea1.eval.tests_eval import TestEvalConfig

    for config in (CodeEvalConfig, TestEvalConfig, SelectConfig):
        with pytest.raises(ValueError, match=said.replace("(", r"\(")):
            config(**options)


# --- codea1 data check, and training's own check --------------------------------------------


def test_data_check_takes_the_options(tmp_path):
    """The user's case: a reference printing 5 MiB is broken under the default cap, ok under
    8 MiB; one taking 0.5 s on an input limited to 0.25 s is ok at time scale 4."""
    path = tmp_path / "p.jsonl"
    save_problems([BIG, SLOW], path)

    def check(*options):
        result = CliRunner().invoke(app, ["data", "check", str(path), *options], env=WIDE)
        return result.exit_code, result.output

    code, said = check()
    assert code == 1 and f"BROKEN    {BIG.id}" in said and "output-limit" in said and f"BROKEN    {SLOW.id}" in said
    code, said = check("--stdin-max-output-mb", "8", "--stdin-time-scale", "4")
    assert code == 0 and "2/2 problems ok" in said, said


def test_training_checks_its_data_under_its_judge_keys(tmp_path):
    """`data.check` runs the references under judge.stdin_max_output_mb (before: 4 MiB
    whatever the key said, so a run with the key at 8 refused BIG), and the command it
    names to see the broken rows carries the key."""
    from codea1.train.config import load_config
    from codea1.train.training_data import broken_training_rows, checked_training_data

    path = tmp_path / "p.jsonl"
    save_problems([BIG], path)
    roomy = load_config(preset="cpu-demo-stdin", overrides=[f"data.train={path}", "judge.stdin_max_output_mb=8"])
    assert broken_training_rows(roomy, [BIG]) == []
    tight = load_config(preset="cpu-demo-stdin", overrides=[f"data.train={path}", "judge.stdin_max_output_mb=2"])
    with pytest.raises(ValueError, match=r"--memory-mb \d+ --stdin-max-output-mb 2` shows each"):
        checked_training_data(tight)


# --- the eval tests table's word ------------------------------------------------------------


def test_what_the_tests_scored_follows_the_problems_kind():
    from codea1.eval.tests_eval import scored_as

    function = Problem(id="f", question="def f():", entry_point="f", reference="def f():\n    return 1\n",
                       tests=["assert f() == 1"])
    assert scored_as([function]) == "functions"
    assert scored_as([CHATTY, SLOW]) == "programs"
    assert scored_as([function, CHATTY]) == "problems"


def test_the_eval_tests_table_names_programs(tmp_path, monkeypatch):
    """Before: 'functions' in the header, the progress line and the note, for stdin problems too."""
    import codea1.eval.tests_eval as tests_eval

    row = {"functions": 1, "pass@2": 50.0, "mut@2": None, "mut@2_tasks": 0, "Mul": None, "LineCov@2": 0.0,
           "mut@2_all": 0.0, "Mul_all": 0.0, "mutants": 3, "killed": 1, "equivalent_looking": 0}
    summary = {"k": 2, "scored": "programs", "sources": {"all": row}, "skipped": [], "pending": []}

    def evaluate_tests(model, data, out, config, on_progress=None):
        on_progress(1, 1, summary)
        return summary

    monkeypatch.setattr(tests_eval, "evaluate_tests", evaluate_tests)
    result = CliRunner().invoke(app, ["eval", "tests", "--model", "m", "--data", "bundled-stdin:demo", "--k", "2",
                                      "--out", str(tmp_path / "out")], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "functions" not in result.output and "function" not in result.output, result.output
    assert "over 0 programs" in result.output and "programs whose 2 tests all pass" in result.output
    assert "every program, scored" in result.output
    header = next(line for line in result.output.splitlines() if "pass@2" in line and "source" in line)
    assert "programs" in header
