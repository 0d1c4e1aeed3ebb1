"""Outputs never land in what is stored: no `data convert` or `mistakes export` OUT in any
training run's directory (its metrics.jsonl, config.yaml, book, checkpoints, or a new name
there), no evaluation --out in the directory of the model it reads (new or not, so that an
evaluation that runs once can always be resumed), and an evaluation directory of another
command named as such. Bad input (a directory as a problem file, an unknown problem id)
exits 2 with one line saying what was wrong."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from test_cli_errors import inputs, run_bad, snapshot  # noqa: F401  (inputs: a fixture)
from typer.testing import CliRunner

from codea1.cli import app
from codea1.data import bundled_problems, save_problems
from codea1.eval.store import RUN_FILE, check_identity, check_out_dir
from codea1.mistakes import MistakeBook, MistakeUpdate
from codea1.train.cli import is_run_config


def _run(root: Path, name: str) -> Path:
    """A training run directory as `codea1 train` leaves it (its config, metrics, book, a checkpoint)."""
    from codea1.train.config import TrainConfig, save_config

    run = root / name
    run.mkdir()
    save_config(TrainConfig(steps=2), run / "config.yaml")
    (run / "metrics.jsonl").write_text('{"step": 1, "code_reward": 0.5}\n')
    with MistakeBook(run / "mistakes.sqlite") as book:
        book.apply_step(1, {"MBPP/2": MistakeUpdate(Counter({"assert f(1) == 2": 2}), Counter())})
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    (run / "checkpoints" / "step-1" / "state.json").write_text('{"step": 1}\n')
    return run


@pytest.fixture
def runs(inputs):  # noqa: F811
    _run(inputs, "run1")
    _run(inputs, "run2")
    (inputs / "alias").symlink_to(inputs / "run2")
    (inputs / "metrics-link.jsonl").symlink_to(inputs / "run2" / "metrics.jsonl")
    return inputs


# --- 1. no command's OUT in a training run's directory -----------------------------------------


@pytest.mark.parametrize("out", [
    "run2/metrics.jsonl", "run2/samples.jsonl", "run2/new.jsonl", "run2/checkpoints/../metrics.jsonl",
    "alias/metrics.jsonl", "metrics-link.jsonl", "run2/tb/sub/x.jsonl",
])
def test_data_convert_never_writes_into_a_run(runs, out):
    """Before: `data convert demo.jsonl run2/metrics.jsonl` replaced the run's metrics (exit
    0), and `train --resume` and `plot` failed after."""
    line = run_bad(runs, ["data", "convert", "ok.jsonl", out])   # exit 2, one line, no file changed
    assert "Invalid value for OUT" in line and f"lies in the training run directory {runs / 'run2'}" in line


@pytest.mark.parametrize("out", ["run1/metrics.jsonl", "run1/mistakes.sqlite", "run1/new.jsonl",
                                 "run2/metrics.jsonl", "alias/x.jsonl"])
def test_mistakes_export_never_writes_into_a_run(runs, out):
    """Before: `mistakes export run2 run1/metrics.jsonl` replaced another run's metrics: only
    the exported run's own files were refused."""
    line = run_bad(runs, ["mistakes", "export", "run2", out])
    assert "Invalid value for OUT" in line and "run directory" in line


def test_outputs_outside_runs_and_in_folders_that_are_no_run_are_written(runs):
    project = runs / "project"          # a config.yaml that is no run's: an ordinary folder
    project.mkdir()
    (project / "config.yaml").write_text("lr: 1\n")
    runner = CliRunner()
    for args, written in ((["data", "convert", "ok.jsonl", "project/problems.jsonl"], "project/problems.jsonl"),
                          (["mistakes", "export", "run2", "exported.jsonl"], "exported.jsonl"),
                          (["mistakes", "export", "run2", "project/book.jsonl"], "project/book.jsonl")):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert (runs / written).read_text()
    assert (runs / "run2" / "metrics.jsonl").read_text() == '{"step": 1, "code_reward": 0.5}\n'


def test_in_run_directory_finds_the_run_at_any_depth(runs):
    from codea1.output_files import in_run_directory, refuse_output_in_run

    run = runs / "run2"
    assert in_run_directory(run / "metrics.jsonl", is_run_config) == run
    assert in_run_directory(run / "checkpoints" / "step-1" / "x", is_run_config) == run
    assert in_run_directory(runs / "alias" / "x.jsonl", is_run_config) == run
    assert in_run_directory(runs / "metrics-link.jsonl", is_run_config) == run   # the link's target
    assert in_run_directory(runs / "elsewhere.jsonl", is_run_config) is None
    with pytest.raises(ValueError, match="run2"):
        refuse_output_in_run(run / "new.jsonl", is_run_config)
    refuse_output_in_run(runs / "new.jsonl", is_run_config)


# --- 2. an evaluation's --out in its model's directory: refused, new or not ---------------------


def test_an_out_in_the_model_directory_is_refused_whether_or_not_it_exists(tmp_path):
    """Before: a new --out in the model directory was let through, and the same command (a
    resume) was refused once it had created it."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = model / "evals"
    for _ in range(2):
        with pytest.raises(ValueError, match=r"lies in the model directory .*put --out elsewhere"):
            check_out_dir(out, str(model), "d.jsonl")
        out.mkdir(exist_ok=True)
    (tmp_path / "sel").mkdir()
    (tmp_path / "sel" / RUN_FILE).write_text("{}")
    with pytest.raises(ValueError, match=r"lies in the --codes-from directory"):
        check_out_dir(tmp_path / "sel" / "again", None, "d.jsonl", codes_from=tmp_path / "sel")
    check_out_dir(tmp_path / "evals", str(model), "d.jsonl")   # beside the model: fine


# --- 3. an evaluation directory of another command ----------------------------------------------


IDENTITIES = {
    "code": {"model": "run2", "data": "d.jsonl", "n": 2, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 4,
             "memory_mb": 4096, "min_timeout_s": 20.0, "slowdown": 5.0},
    "tests": {"model": "run2", "data": "d.jsonl", "k": 2, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 4,
              "white_box": True, "families": ["binary"], "mutation_style": "text", "dedupe_mutants": False,
              "header": "auto", "scoring": 2, "protocol": "answer"},
    "select": {"code_model": "run2", "test_model": "run2", "data": "d.jsonl", "n_code": 2, "n_test": 2,
               "tests_per_suite": 8, "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 4, "seed": 0,
               "codes_from": None},
}


@pytest.mark.parametrize("on_disk, now", [(a, b) for a in IDENTITIES for b in IDENTITIES if a != b])
def test_an_evaluation_directory_of_another_command_is_named_as_such(tmp_path, on_disk, now):
    """Before: `eval tests --out DIR_OF_EVAL_CODE` spoke of "rows scored by another version
    of codea1", and select/code listed every setting as a difference."""
    out = tmp_path / f"ev_{on_disk}"
    out.mkdir()
    (out / RUN_FILE).write_text(json.dumps(IDENTITIES[on_disk]))
    before = snapshot(tmp_path)
    with pytest.raises(ValueError) as err:
        check_identity(out, IDENTITIES[now])
    assert str(err.value) == f"{out} is an `eval {on_disk}` directory; `eval {now}` writes its own: use another --out"
    assert snapshot(tmp_path) == before
    from codea1.eval.store import kind_of

    assert kind_of(IDENTITIES[on_disk]) == on_disk


def test_the_same_command_with_other_settings_still_lists_them(tmp_path):
    (tmp_path / RUN_FILE).write_text(json.dumps(IDENTITIES["code"]))
    check_identity(tmp_path, IDENTITIES["code"])      # a resume
    with pytest.raises(ValueError, match=r"other settings \(n: 2 on disk vs 3 now\)"):
        check_identity(tmp_path, {**IDENTITIES["code"], "n": 3})


def test_compare_still_reads_the_kinds():
    from codea1.eval import compare

    assert [compare.kind_of(IDENTITIES[k]) for k in IDENTITIES] == list(IDENTITIES)


# --- 4. bad input: one line, exit 2 --------------------------------------------------------------


def test_data_check_and_convert_of_a_directory_say_so(inputs):  # noqa: F811
    (inputs / "data").mkdir()
    save_problems(bundled_problems("train")[:1], inputs / "data" / "one.jsonl")
    for args, hint in ((["data", "check", "data"], "FILE"), (["data", "convert", "data", "out.jsonl"], "SOURCE")):
        line = run_bad(inputs, args)
        assert f"Invalid value for {hint}: data is a directory; expected a problem file" in line, line


def test_mistakes_show_of_an_unknown_problem_is_bad_input(runs):
    result = CliRunner().invoke(app, ["mistakes", "show", "run2", "T/nope"])  # (reading opens the WAL)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.startswith("error: Invalid value for PROBLEM: 'T/nope': no such problem in the Mistake "
                                    "Book run2") and len(result.stderr.splitlines()) == 1, result.stderr
    result = CliRunner().invoke(app, ["mistakes", "show", "run2", "MBPP/2"])
    assert result.exit_code == 0 and "assert f(1) == 2" in result.output
