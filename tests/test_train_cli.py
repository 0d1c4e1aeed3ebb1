"""`codea1 train`: argument errors, a tiny run and its resume through the command line."""

from __future__ import annotations

from typer.testing import CliRunner

from codea1.cli import app
from codea1.train.metrics import read_metrics

runner = CliRunner()


def test_train_needs_a_preset_or_config():
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2
    assert "--preset" in result.output


def test_a_wrong_key_is_a_clear_error():
    result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--set", "grpo.lrr=1"])
    assert result.exit_code == 2
    assert "unknown config key 'grpo.lrr'" in result.output and "grpo.lr" in result.output


def test_resume_takes_no_new_config(tmp_path):
    result = runner.invoke(app, ["train", "--resume", str(tmp_path), "--preset", "cpu-demo"])
    assert result.exit_code == 2
    assert "only --steps" in result.output


def test_tiny_run_and_resume_from_the_command_line(tmp_path):
    from tiny_model import tiny_test_model

    model = tiny_test_model(tmp_path / "model")
    run = tmp_path / "run"
    args = ["train", "--preset", "cpu-demo", "--run-dir", str(run), "--steps", "1",
            "--set", f"model.name={model}", "--set", "model.dtype=float32",
            "--set", "data.problems_per_step=1", "--set", "rollout.n_code=2", "--set", "rollout.n_test=2",
            "--set", "rollout.code.max_new_tokens=4", "--set", "rollout.test.max_new_tokens=4",
            "--set", "validation.every=0", "--set", "logging.progress=plain", "--set", "threads=1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "step 1 of 1" in result.output
    again = runner.invoke(app, ["train", "--resume", str(run), "--steps", "2"])
    assert again.exit_code == 0, again.output
    assert "resumed" in again.output
    assert [r["step"] for r in read_metrics(run)] == [1, 2]
    assert (run / "checkpoints" / "step-2").is_dir()
