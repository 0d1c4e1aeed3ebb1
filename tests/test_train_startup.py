"""What a new user meets before and around the first step: a quiet start-up, the inputs of
a new run checked all at once before anything is created, and `--resume RUN --steps N`."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codea1.cli import app
from codea1.train.metrics import read_metrics

runner = CliRunner()


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` with its sha256 (directories too, as '<dir>')."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def tiny_args(model: Path, run: Path, steps: int) -> list[str]:
    return ["train", "--preset", "cpu-demo", "--run-dir", str(run), "--steps", str(steps),
            "--set", f"model.name={model}", "--set", "model.dtype=float32",
            "--set", "data.problems_per_step=1", "--set", "rollout.n_code=2", "--set", "rollout.n_test=2",
            "--set", "rollout.code.max_new_tokens=4", "--set", "rollout.test.max_new_tokens=4",
            "--set", "validation.every=0", "--set", "logging.progress=plain", "--set", "threads=1",
            "--set", "grpo.warmup_steps=0", "--set", "logging.tensorboard=false"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tiny_model import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("tiny") / "model")


# --------------------------------------------------------------------------- quiet start-up


def test_training_start_up_prints_no_tqdm_line_and_no_third_party_warning(tiny_model, tmp_path):
    """`codea1 train` to a pipe, as a log file gets it: codea1's own lines only."""
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "CODEA1_DEBUG")}
    done = subprocess.run([sys.executable, "-m", "codea1.cli", *tiny_args(tiny_model, run, 1)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert "start-up: loading the models" in lines  # the ~45 s of the real model are named
    noise = [line for line in lines if "%|" in line or "it/s]" in line or "Warning" in line
             or "warn(" in line or "transformers" in line or "peft" in line]
    assert noise == [], "\n".join(lines)


def test_quiet_loading_silences_the_gguf_bar_and_loader_advice(capfd, caplog):
    """The GGUF converter's own tqdm bar and transformers' logger advice are silenced inside,
    and back afterwards (the check could fail: outside, both print)."""
    import warnings

    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    from codea1.models import quiet_loading

    logger = hf_logging.get_logger("transformers.quantizers.quantizer_gguf")

    def noisy() -> None:
        for _ in gguf_utils.tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."):
            pass
        logger.warning("Pass `dtype=torch.float32` to avoid it")
        warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_loading():
            noisy()
    quiet = capfd.readouterr()
    assert quiet.out == "" and quiet.err == "" and caught == [] and caplog.records == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        noisy()
    loud = capfd.readouterr()
    assert "de-quantizing" in loud.err and len(caught) == 1
    assert [r.getMessage() for r in caplog.records] == ["Pass `dtype=torch.float32` to avoid it"]


# --------------------------------------------------------------------------- a paper preset without its inputs


def test_a_paper_preset_reports_every_missing_input_at_once_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub here: the model can come from nowhere
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # and no cache holds it
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    result = runner.invoke(app, ["train", "--preset", "paper-1.5b", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert message.count("\n") == 0 and message.startswith("error: ")
    assert "data.train is required" in message and "kodcode_hard_dual_model_training_data_mix.parquet" in message
    assert "data.heldout is required" in message and "validation_data_mix.parquet" in message
    assert "github.com/ZJU-REAL/Code-A1" in message and "Code-A1/code/rl/train_data/" in message
    assert "model.name: model Qwen/Qwen2.5-Coder-1.5B-Instruct: not in the Hugging Face cache" in message
    assert snapshot(tmp_path) == before  # nothing created: no run directory, no config.yaml


def test_with_its_data_given_only_the_model_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    (tmp_path / "bad.jsonl").write_text('{"id": "x"}\n')
    before = snapshot(tmp_path)
    result = runner.invoke(app, ["train", "--preset", "paper-1.5b", "--run-dir", str(tmp_path / "run"),
                                 "--set", f"data.train={tmp_path / 'bad.jsonl'}", "--set", "data.heldout=null"])
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert "bad.jsonl" in message and "model.name: model Qwen/Qwen2.5-Coder-1.5B-Instruct" in message
    assert "data.train is required" not in message and message.count("\n") == 0
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- --resume RUN --steps N


def test_resume_steps_refuses_a_total_at_or_below_the_step_and_extends_the_schedule(tiny_model, tmp_path):
    from codea1.grpo import warmup_cosine
    from codea1.train.config import load_config

    run = tmp_path / "run"
    first = runner.invoke(app, tiny_args(tiny_model, run, 1))
    assert first.exit_code == 0, first.output
    before = snapshot(run)
    for steps in ("1", "0"):
        refused = runner.invoke(app, ["train", "--resume", str(run), "--steps", steps])
        assert refused.exit_code == 2
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("error: ")
        if steps == "1":
            assert f"--steps 1: {run} is already at step 1 (of 1); give a total above 1" in refused.stderr
    assert snapshot(run) == before  # config.yaml, checkpoints and metrics byte for byte

    extended = runner.invoke(app, ["train", "--resume", str(run), "--steps", "3"])
    assert extended.exit_code == 0, extended.output
    lr = load_config(preset="cpu-demo").grpo.lr
    assert "steps 1 -> 3, recorded in" in extended.output
    assert f"step 2 trains at lr {lr * 0.75:.3g} (the 1-step schedule had 0)" in extended.output
    assert "steps: 3" in (run / "config.yaml").read_text()
    rates = [r["update/code/lr"] for r in read_metrics(run)]
    # step 1 as trained; steps 2 and 3 on the 3-step cosine, from its step 2 on (no step at
    # the old schedule's end rate, 0)
    assert rates == pytest.approx([lr, lr * warmup_cosine(1, 0, 3), lr * warmup_cosine(2, 0, 3)])
    assert math.isclose(warmup_cosine(1, 0, 3), 0.75)
    again = runner.invoke(app, ["train", "--resume", str(run)])  # a plain resume: already done
    assert again.exit_code == 0 and "step 3" in again.output


def test_model_unavailable_answers_without_loading_anything(tmp_path, monkeypatch):
    from codea1.models import model_unavailable

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("CODEA1_CACHE", str(tmp_path / "cache"))  # no GGUF assembled here yet
    assert model_unavailable(tmp_path) is None                      # a directory that exists
    assert "model path not found" in model_unavailable(tmp_path / "nope" / "x")
    assert "GGUF file not found" in model_unavailable(tmp_path / "m.gguf")
    # the offline extra (installed with the dev set-up) is enough for the 0.5B's name
    assert model_unavailable("qwen2.5-coder-0.5b-instruct") is None
    assert not (tmp_path / "cache").exists()                        # and nothing was assembled
    assert "no such model" in model_unavailable("someone/not-cached")
