"""Bad input to any `codea1` command: one `error:` line on stderr, exit 2 (or 1 for a
failure at run time), no traceback, and the disk as it was (no file changed, none and no
directory created). One case per bad input seen in issue 15."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codea1.cli import app
from codea1.data import bundled_problems, save_problems


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A directory of good and bad input files; the tests run inside it."""
    monkeypatch.chdir(tmp_path)
    good = bundled_problems("train")[:2]
    save_problems(good, tmp_path / "ok.jsonl")
    lines = (tmp_path / "ok.jsonl").read_bytes().splitlines()
    (tmp_path / "latin1.jsonl").write_bytes(lines[0] + b"\n" + lines[1].replace(b"def", b"d\xe9f", 1) + b"\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    (tmp_path / "malformed.jsonl").write_text('{"id": "x", "question": \n')
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"problem": "p", "test": "t", "extra_info": {"a": 1}}]  # Code-A1 rows without GT_code
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "nocols.parquet")
    (tmp_path / "afile").write_text("a file, not a directory\n")
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "existing.txt").write_text("keep me\n")
    (tmp_path / "code.txt").write_text("def f():\n    return 1\n")
    (tmp_path / "tests.txt").write_text("assert f() == 1\n")
    (tmp_path / "problem.json").write_text(json.dumps(good[0].to_dict()))
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "code_reward": 0.5}\n')
    (run / "mistakes.sqlite").write_bytes(b"a Mistake Book that must survive\n")
    return tmp_path


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def run_bad(root: Path, args: list[str], code: int = 2, env: dict | None = None):
    before = snapshot(root)
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception  # nothing escaped: no traceback
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert snapshot(root) == before, "the command changed, created or deleted files"
    return lines[0]


TRAIN = ["train", "--preset", "cpu-demo", "--run-dir", "new-run"]

CASES = [
    # the training set: empty, blank, malformed, not UTF-8, parquet missing columns, missing
    (TRAIN + ["--set", "data.train=empty.jsonl"], "empty.jsonl: expected at least one problem"),
    (TRAIN + ["--set", "data.train=blank.jsonl"], "blank.jsonl: expected at least one problem"),
    (TRAIN + ["--set", "data.train=malformed.jsonl"], "malformed.jsonl, row 1: expected one JSON object"),
    (TRAIN + ["--set", "data.train=latin1.jsonl"], "latin1.jsonl, row 2: expected UTF-8 text"),
    (TRAIN + ["--set", "data.train=nocols.parquet"], "nocols.parquet, row 1: expected the columns of a known "
     "format: closest is codea1-rows"),
    (TRAIN + ["--set", "data.heldout=malformed.jsonl"], "malformed.jsonl, row 1"),
    (TRAIN + ["--set", "data.train=missing.jsonl"], "missing.jsonl: no such problem file"),
    (TRAIN + ["--set", "data.train=bundled:hard"], "data.train: 'bundled:hard': unknown bundled split"),
    (TRAIN + ["--set", "data.include=[a1/999-*]"], "data.include: no problem of 'bundled:demo' matches 'a1/999-*'"),
    (TRAIN + ["--set", "data.include=[]"], "data.include is empty"),
    # the model and the run directory
    (TRAIN + ["--set", "model.name=./no-such-model"], "model path not found: ./no-such-model"),
    (TRAIN + ["--set", "model.name=/no/such/model.gguf"], "GGUF file not found"),
    (["train", "--preset", "cpu-demo", "--run-dir", "afile/run"], "afile is a file, not a directory"),
    (["train", "--preset", "cpu-demo", "--run-dir", "afile"], "afile is a file, expected a directory"),
    (["train", "--config", "binary.bin"], "binary.bin: not a YAML config (not UTF-8"),
    (["train", "--preset", "cpu-demo", "--steps", "0"], "'--steps'"),
    (["train", "--preset", "cpu-demo", "--time-limit", "2 hours"], "'--time-limit'"),
    (["train", "--preset", "cpu-demo", "--time-limit", "0m"], "'--time-limit'"),
    (["train", "--resume", "no-such-run"], "no-such-run is not a run directory"),
    (["train", "--preset", "cpu-demo", "--set", "grpo.lr=abc"], "config key 'grpo.lr'"),
    # data check / convert
    (["data", "check", "ok.jsonl", "--timeout", "-1"], "Invalid value for '--timeout'"),
    (["data", "check", "ok.jsonl", "--workers", "0"], "Invalid value for '--workers'"),
    (["data", "check", "ok.jsonl", "--memory-mb", "1"], "Invalid value for '--memory-mb'"),
    (["data", "check", "empty.jsonl"], "empty.jsonl: expected at least one problem"),
    (["data", "check", "latin1.jsonl"], "latin1.jsonl, row 2: expected UTF-8 text"),
    (["data", "check", "nocols.parquet"], "lacks GT_code"),
    (["data", "convert", "ok.jsonl", "run"], "run is a directory, expected a file name"),
    (["data", "convert", "ok.jsonl", "out.parquet"], "out.parquet: expected a file name ending in .jsonl"),
    (["data", "convert", "ok.jsonl", "afile/out.jsonl"], "afile is a file, not a directory"),
    (["data", "convert", "empty.jsonl", "out.jsonl"], "empty.jsonl: expected at least one problem"),
    (["data", "convert", "ok.jsonl", "new/out.jsonl", "--format", "evalplus"], "field 'task_id'"),
    # judge, plot
    (["judge", "--problem", "binary.bin", "--code", "code.txt", "--tests", "tests.txt"], "binary.bin: not UTF-8"),
    (["judge", "--problem", "run", "--code", "code.txt", "--tests", "tests.txt"], "--problem"),
    (["judge", "--problem", "problem.json", "--code", "code.txt", "--tests", "binary.bin"], "--tests"),
    (["plot", "run", "--out", "afile/plots"], "afile is a file, not a directory"),
    (["plot", "run", "--out", "existing.txt"], "existing.txt is a file, expected a directory"),
    (["plot", "afile"], "afile/metrics.jsonl: not found"),
    # eval
    (["eval", "code", "--model", "x", "--data", "ok.jsonl", "--out", "existing.txt"], "--out: existing.txt is a file"),
    (["eval", "code", "--model", "./no-such-model", "--data", "ok.jsonl", "--out", "e"], "model path not found"),
    (["eval", "tests", "--model", "/no/such/dir", "--data", "ok.jsonl", "--out", "e"], "model path not found"),
    (["eval", "code", "--model", "x", "--data", "ok.jsonl", "--out", "e", "--dtype", "float8"],
     "Invalid value for '--dtype': 'float8' is not one of auto"),
    (["eval", "tests", "--model", "x", "--data", "ok.jsonl", "--out", "e", "--device", "tpu"], "'--device'"),
    (["eval", "code", "--model", "x", "--data", "empty.jsonl", "--out", "e"], "empty.jsonl: expected at least one"),
    (["eval", "tests", "--model", "x", "--data", "empty.jsonl", "--out", "e"], "empty.jsonl: expected at least one"),
    (["eval", "code", "--model", "x", "--data", "latin1.jsonl", "--out", "e"], "latin1.jsonl, row 2"),
    (["eval", "code", "--model", "x", "--data", "ok.jsonl", "--out", "afile/e"], "afile is a file"),
    (["eval", "mutants", "binary.bin"], "binary.bin: not UTF-8"),
    # mistakes, sandbox, usage
    (["mistakes", "stats", "run"], "not a Mistake Book"),
    (["mistakes", "export", "run", "afile/x.jsonl"], "afile is a file"),
    (["sandbox", "run", "binary.bin"], "binary.bin: not UTF-8"),
    (["sandbox", "run", "code.txt", "--timeout", "0"], "Invalid value for '--timeout'"),
    (["no-such-command"], "No such command"),
]


@pytest.mark.parametrize("args, expected", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_and_changes_nothing(inputs, args, expected):
    line = run_bad(inputs, args)
    assert expected in line, line


def test_a_new_run_over_a_mistake_book_with_bad_data_keeps_the_book(inputs):
    book = (inputs / "run" / "mistakes.sqlite").read_bytes()
    line = run_bad(inputs, ["train", "--preset", "cpu-demo", "--run-dir", "run", "--set", "data.train=empty.jsonl"])
    assert "empty.jsonl" in line
    assert (inputs / "run" / "mistakes.sqlite").read_bytes() == book


def test_option_names_are_the_ones_typed_not_internal_ones(inputs):
    line = run_bad(inputs, ["sandbox", "run", "code.txt", "--memory-mb", "1"])
    assert "'--memory-mb'" in line and "Limits" not in line and "memory_mb" not in line


def test_debug_shows_the_traceback(inputs, monkeypatch):
    args = ["data", "check", "empty.jsonl"]
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 2 and isinstance(plain.exception, SystemExit)
    for debug_args, env in ((["--debug", *args], None), ([*args, "--debug"], None), (args, {"CODEA1_DEBUG": "1"})):
        result = CliRunner().invoke(app, debug_args, env=env)
        assert result.exit_code == 1 and not isinstance(result.exception, SystemExit), result.output
        assert "at least one problem" in str(result.exception)


def test_a_failure_at_run_time_exits_1(inputs, monkeypatch):
    """A model that is there but does not load is no bad input: exit 1, one line."""
    bad_model = inputs / "broken-model"
    bad_model.mkdir()
    (bad_model / "config.json").write_text("{}")
    before = snapshot(inputs)
    result = CliRunner().invoke(app, ["eval", "code", "--model", str(bad_model), "--data", "ok.jsonl",
                                      "--out", "e", "--limit", "1", "--workers", "1", "--greedy"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.startswith("error: could not load") and len(result.stderr.splitlines()) == 1, result.stderr
    assert snapshot(inputs) == before  # the output directory it made is gone again


def test_ctrl_c_in_a_command_says_how_to_go_on_and_exits_130(inputs, monkeypatch):
    """Ctrl-C in `eval` (or any command but train, which checkpoints) ended silently with
    exit 130: now one line says that the same command goes on, an evaluation resuming."""
    import codea1.eval.code as code

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(code, "evaluate_code", interrupted)  # (looked up when the command runs)
    result = CliRunner().invoke(app, ["eval", "code", "--model", "x", "--data", "ok.jsonl", "--out", "e"])
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == ("interrupted (Ctrl-C): run the same command again to go on (an evaluation "
                                     "keeps the problems it finished and resumes from there)")


def test_eval_code_names_only_the_files_it_wrote(inputs):
    from codea1.data import Problem

    no_tests = Problem(id="p/none", question="def f():", entry_point="f", reference="def f():\n    return 1\n")
    save_problems([no_tests], inputs / "untested.jsonl")
    result = CliRunner().invoke(app, ["eval", "code", "--model", "x", "--data", "untested.jsonl", "--out", "e"])
    assert result.exit_code == 0, result.output
    assert "no golden tests" in result.output
    assert not (inputs / "e" / "samples.jsonl").exists() and "samples.jsonl" not in result.output
    assert "wrote e/summary.json" in result.output


def test_version():
    from codea1 import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"codea1 {__version__}\n"


def test_a_device_that_is_not_there_is_one_line_and_leaves_no_output_dir(inputs):
    import torch

    from tiny_model import tiny_test_model

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    model = tiny_test_model(inputs.parent / "tiny")
    line = run_bad(inputs, ["eval", "code", "--model", str(model), "--data", "ok.jsonl", "--out", "e",
                            "--device", "cuda", "--limit", "1", "--workers", "1", "--greedy"], code=1)
    assert "CUDA is not available here" in line


def test_expected_errors_and_bugs_are_told_apart():
    from codea1.cli import explain
    from codea1.train.checkpoint import CheckpointError

    def raised(exc):
        try:
            raise exc
        except BaseException as caught:
            return caught

    assert explain(raised(CheckpointError("run/checkpoints/step-2/optimizer.pt: truncated"))) == (
        2, "run/checkpoints/step-2/optimizer.pt: truncated")
    assert explain(raised(MemoryError()))[0] == 1
    # a full disk has its own exit code, and names the file
    assert explain(raised(OSError(28, "No space left on device", "out.jsonl")))[:1] == (3,)
    assert explain(raised(OSError(28, "No space left on device", "out.jsonl")))[1].startswith(
        "out.jsonl: no space left on device (the disk is full)")
    assert explain(raised(OSError(5, "Input/output error", "out.jsonl"))) == (1, "out.jsonl: Input/output error")
    assert explain(raised(FileNotFoundError(2, "No such file or directory", "x.jsonl")))[0] == 2
    assert explain(raised(KeyError("a bug"))) is None
    assert explain(raised(json_error())) == (2, "not valid JSON: Expecting ',' delimiter at line 1, column 6")
    # a ValueError from inside a library (not raised by codea1 itself) is unexpected: a bug
    try:
        int("abc")
    except ValueError as exc:  # raised here, in a test, not in codea1's code
        assert explain(exc) is None
    from codea1.data.formats import get_format

    assert explain(raised_by(get_format, "nope"))[0] == 2  # raised by codea1: a message for the user


def json_error():
    import json

    try:
        json.loads("[1, 2")
    except ValueError as exc:
        return exc


def raised_by(function, *args):
    try:
        function(*args)
    except BaseException as caught:
        return caught
    raise AssertionError("nothing raised")


def _fake_checkpoint(run: Path) -> Path:
    """A run directory whose one checkpoint has every file `train --resume` reads."""
    import torch
    from safetensors.torch import save_file

    from codea1.mistakes import MistakeBook
    from codea1.train.checkpoint import save_rng
    from codea1.train.config import load_config, save_config

    run.mkdir()
    save_config(load_config(preset="cpu-demo"), run / "config.yaml")
    ck = run / "checkpoints" / "step-2"
    (ck / "policies").mkdir(parents=True)
    (ck / "state.json").write_text(json.dumps({"step": 2, "data": {"epoch": 0, "index": 4, "n": 8},
                                               "metrics_offsets": {"metrics": 0, "samples": 0}}))
    torch.save({"optimizers": {}, "schedulers": {}}, ck / "optim.pt")
    save_rng(ck / "rng.pt")
    for key in ("code", "test"):
        save_file({"w": torch.zeros(64, 64)}, str(ck / "policies" / f"{key}.safetensors"))
    (ck / "policies" / "policies.json").write_text(json.dumps({"mode": "lora-shared", "weights": ["code", "test"]}))
    with MistakeBook(run / "book.sqlite") as book:
        book.snapshot(ck / "mistakes.sqlite")
    (run / "book.sqlite").unlink()
    return ck


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


BROKEN = [
    ("optim.pt", _truncate),
    ("rng.pt", Path.unlink),
    ("state.json", lambda p: p.write_text('{"step": 2}')),
    ("state.json", lambda p: p.write_text('{"step": 2, "data": {"epoch": 0, "index": 9, "n": 8}, '
                                          '"metrics_offsets": {"metrics": 0, "samples": 0}}')),
    ("policies/test.safetensors", _truncate),
    ("policies/policies.json", lambda p: p.write_text("{")),
    ("mistakes.sqlite", lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)),
]


@pytest.mark.parametrize("name, damage", BROKEN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BROKEN)])
def test_resume_names_the_broken_checkpoint_file_before_loading_a_model(inputs, monkeypatch, name, damage):
    import codea1.models

    ck = _fake_checkpoint(inputs / "crashed")
    damage(ck / name)

    def no_model(*_a, **_k):
        raise AssertionError("the model was loaded before the checkpoint was checked")

    monkeypatch.setattr(codea1.models, "load_policies", no_model)
    line = run_bad(inputs, ["train", "--resume", "crashed"])
    assert f"step-2/{name}" in line, line


def test_an_intact_checkpoint_passes_verification(tmp_path):
    from codea1.train.checkpoint import verify_checkpoint

    assert verify_checkpoint(_fake_checkpoint(tmp_path / "run"))["step"] == 2
