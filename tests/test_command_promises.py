"""Smaller promises of the commands a new user meets: a model neither cached nor reachable
is one line in seconds in `eval` as in `train`; an export is readable by others, quiet,
and says when Ctrl-C ended it; help names every bundled split; the files the README's
commands create are ignored by git."""

from __future__ import annotations

import json
import stat
import sys
import time
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codea1.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def test_eval_of_a_model_neither_cached_nor_reachable_is_one_line_in_seconds(tmp_path):
    """Fault tried: without the check before loading, the hub client's retries printed a
    line each over about a minute (the issue counted 22)."""
    out = tmp_path / "evals"
    t = time.monotonic()
    result = runner.invoke(app, ["eval", "code", "--model", "codea1-nobody/no-such-model-xyz", "--data",
                                 "bundled:demo", "--out", str(out), "--greedy", "--limit", "1"])
    took = time.monotonic() - t
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: model codea1-nobody/no-such-model-xyz: "), lines
    assert took < 20, took
    assert not out.exists()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    sys.path.insert(0, str(Path(__file__).parent))
    from export_runs import make_run

    from tiny_model import tiny_test_model

    root = tmp_path_factory.mktemp("export")
    return make_run(root / "run", tiny_test_model(root / "model"))


def test_an_exported_adapter_is_readable_by_others(run, tmp_path):
    """Fault tried: safetensors' own mode, 0600, on adapter_model.safetensors."""
    out = tmp_path / "adapter"
    result = runner.invoke(app, ["export", str(run), str(out), "--role", "code", "--format", "peft"])
    assert result.exit_code == 0, result.output
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes["adapter_model.safetensors"] & 0o044 == 0o044, modes
    assert all(m & 0o044 == 0o044 for m in modes.values()), modes


def test_an_adapter_of_a_base_without_config_exports_without_a_warning(tmp_path):
    """A GGUF base (no config.json beside it) made peft warn "Could not find a config file
    ..." into export's output (fault tried: peft's save_embedding_layers="auto")."""
    from codea1.engines.adapters import export_adapter
    from codea1.models import ModelConfig, load_policies
    from tiny_model import tiny_test_model

    policies = load_policies(ModelConfig(name=str(tiny_test_model(tmp_path / "model")), mode="lora-shared",
                                         dtype="float32", lora_r=4))
    model = policies.module("code")
    for config in model.peft_config.values():
        config.base_model_name_or_path = str(tmp_path / "a-gguf-base-without-config")
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        export_adapter(model, "code", tmp_path / "out", torch.float32)
    assert (tmp_path / "out" / "adapter_model.safetensors").is_file()


def test_ctrl_c_during_export_says_so_and_leaves_nothing(run, tmp_path, monkeypatch):
    import codea1.export as export

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_peft", interrupted)
    out = tmp_path / "sub" / "adapter"
    result = runner.invoke(app, ["export", str(run), str(out), "--role", "code", "--format", "peft"])
    assert result.exit_code == 130
    assert f"interrupted: nothing exported, {out} not written" in result.output
    assert not (tmp_path / "sub").exists()


def test_eval_data_help_names_every_bundled_split():
    for command in ("code", "tests", "select"):
        result = runner.invoke(app, ["eval", command, "--help"], terminal_width=200)
        text = " ".join(result.output.split())
        assert "bundled:demo" in text and "bundled:all" in text, (command, text)


def test_git_ignores_what_the_readme_commands_create():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    for entry in ("runs/", "evals/", "mistakes.jsonl"):
        assert entry in ignored, entry


def _judge_a_run(tmp_path, code: str, tests: str, overrides: list[str]) -> tuple[Path, list[str]]:
    """A cpu-demo run directory (config.yaml only, with `overrides`) and the `codea1 judge
    --json` arguments for test_judge's ADD problem with `code` and `tests`."""
    from test_judge import ADD

    from codea1.train.config import load_config, save_config

    run = tmp_path / "run"
    run.mkdir()
    save_config(load_config(preset="cpu-demo", overrides=overrides), run / "config.yaml")
    (tmp_path / "p.json").write_text(json.dumps(ADD.to_dict()))
    (tmp_path / "code.txt").write_text(code)
    (tmp_path / "tests.txt").write_text(tests)
    return run, ["judge", "--problem", str(tmp_path / "p.json"), "--code", str(tmp_path / "code.txt"),
                 "--tests", str(tmp_path / "tests.txt"), "--json"]


def test_judge_given_a_run_judges_with_its_suite_size(tmp_path):
    """A cpu-demo sample's reward reproduces with `--run` (suite size 4, not the default 8).
    Fault tried: no --run (the reward of the default G=8 differs)."""
    from test_judge import BAD, SUITE

    run, args = _judge_a_run(tmp_path, BAD, SUITE, [])
    default = json.loads(runner.invoke(app, args).output)
    as_run = json.loads(runner.invoke(app, [*args, "--run", str(run)]).output)
    explicit = json.loads(runner.invoke(app, [*args, "--suite-size", "4"]).output)
    assert default["valid_ratio"] == pytest.approx(3 / 8)
    assert as_run["valid_ratio"] == explicit["valid_ratio"] != default["valid_ratio"]
    assert as_run["test_reward"] == explicit["test_reward"]
    missing = runner.invoke(app, [*args, "--run", str(tmp_path)])
    assert missing.exit_code == 2 and "no config.yaml" in missing.output


def test_judge_given_a_run_judges_with_its_sandbox_limits(tmp_path):
    """`--run` judges "as the run judges": with its judge.memory_mb too, not the default 1024
    MiB. Fault tried: the limits were dropped (only JudgeConfig's fields were read, and
    `limits` is not one of its config keys), so a candidate the run's judge stops at its
    memory cap passed here."""
    run, args = _judge_a_run(tmp_path, "def add(a, b):\n    block = bytearray(400 * 2**20)\n    return a + b\n",
                             "```python\nassert add(1, 2) == 3\n```\n", ["judge.memory_mb=128"])
    default = json.loads(runner.invoke(app, args).output)
    as_run = json.loads(runner.invoke(app, [*args, "--run", str(run)]).output)
    assert default["code_valid"] and default["tests"][0]["passed"] is True
    assert as_run["tests"][0]["passed"] is not True, as_run


def test_the_preset_help_and_docs_name_every_preset():
    """--preset's help, README's command table and TRAINING.md's list once left out
    cpu-demo-stdin: each names every bundled preset."""
    from codea1.cli_options import PRESET_OPTION
    from codea1.train.config import PRESETS

    readme = (ROOT / "README.md").read_text()
    training = " ".join((ROOT / "docs" / "TRAINING.md").read_text().split())
    for name in PRESETS:
        assert name in PRESET_OPTION.help, name
        assert f"\\|{name}" in readme or f"preset {name}" in readme, name
        assert f"`{name}`" in training, name
