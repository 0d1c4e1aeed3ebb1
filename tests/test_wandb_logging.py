"""Weights & Biases logging of a training run (`logging.wandb`), on the tiny model.

A recording stand-in for the `wandb` module checks what is logged (every metrics.jsonl
row at its step, the samples table, the config, the run id on resume) and that a W&B
that raises never stops a run; the real `wandb` then runs offline with no network
(those tests skip only where wandb is not installed: `pip install 'codea1[wandb]'`)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest
import torch
from tiny_run import make_scripted, tiny_overrides

from codea1.train.config import load_config
from codea1.train.loop import train
from codea1.train.metrics import read_metrics
from codea1.train.wandb_logger import RUN_ID_FILE, SAMPLE_COLUMNS

torch.set_num_threads(1)


@pytest.fixture
def scripted(monkeypatch, tiny):
    import codea1.engines.hf_engine as hf_engine

    monkeypatch.setattr(hf_engine, "generate", make_scripted(hf_engine.generate, tiny["problems"]))


def _config(tiny, steps=3, *extra):
    return load_config(preset="cpu-demo", overrides=[
        *tiny_overrides(tiny, "a1", steps), "logging.tensorboard=false", "logging.wandb.project=codea1-tests",
        "logging.wandb.mode=offline", "logging.samples_every=2", *extra])


class FakeWandb(types.ModuleType):
    """Records what a run hands to W&B; `fail` names the call that raises."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__("wandb")
        self.fail = fail
        self.inits: list[dict] = []
        self.logged: list[dict] = []
        self.finished = 0
        fake = self

        class Run:
            def define_metric(self, name, step_metric=None):
                pass

            def log(self, row):
                if fake.fail == "log":
                    raise ConnectionError("api.wandb.ai: connection refused\nsecond line")
                fake.logged.append(dict(row))

            def finish(self, exit_code=0):
                fake.finished += 1

        class Table:
            def __init__(self, columns, data):
                self.columns, self.data = columns, data

        self.Run, self.Table = Run, Table

    def init(self, **kwargs):
        if self.fail == "init":
            raise PermissionError("wandb: invalid API key")
        self.inits.append(kwargs)
        return self.Run()


def _use(monkeypatch, fake):
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return fake


def test_every_metric_at_its_step_samples_config_and_resume(tmp_path, tiny, scripted, monkeypatch):
    fake = _use(monkeypatch, FakeWandb())
    run = tmp_path / "run"
    cfg = _config(tiny, 3)
    first = train(cfg, run, stop_after=2)
    assert first.stopped and first.step == 2
    run_id = json.loads((run / RUN_ID_FILE).read_text())["id"]
    # W&B's rule: lowercase letters and digits (not `islower()`, False for an id of digits
    # only: 12 random hex digits are all decimal once in about 280 runs, CI's flake at 3f7781e)
    assert len(run_id) == 12 and set(run_id) <= set("abcdefghijklmnopqrstuvwxyz0123456789")
    init = fake.inits[0]
    assert (init["project"], init["mode"], init["id"], init["dir"]) == ("codea1-tests", "offline", run_id, str(run))
    assert init["config"] == cfg.model_dump(mode="json")
    train(None, run, resume=True)
    assert [i["id"] for i in fake.inits] == [run_id, run_id]      # the same W&B run
    assert fake.finished == 2
    metrics = [r for r in fake.logged if "samples" not in r]
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]              # step 0: validation before training
    for row in rows:
        logged = [m for m in metrics if m["step"] == row["step"]]
        assert logged, row["step"]
        # (the interrupted call logged step 2 too; the resumed one did not repeat it)
        for key, value in row.items():
            if isinstance(value, (int, float)):
                assert logged[-1][key] == pytest.approx(value), key
        assert set(logged[-1]) == set(row)
    tables = [r for r in fake.logged if "samples" in r]
    assert [t["step"] for t in tables] == [2]                   # samples_every=2
    table = tables[0]["samples"]
    assert table.columns == SAMPLE_COLUMNS
    shown = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines() if json.loads(x)["step"] == 2]
    assert len(table.data) == len({s["problem_id"] for s in shown}) > 0
    first_code = next(s for s in shown if s["role"] == "code")
    row = next(r for r in table.data if r[1] == first_code["problem_id"])
    assert row[2] == first_code["text"] and row[3] == pytest.approx(first_code["reward"])


@pytest.mark.parametrize("fail", ["init", "log"])
def test_a_failing_wandb_is_one_warning_line_and_the_run_goes_on(tmp_path, tiny, scripted, monkeypatch, capfd, fail):
    fake = _use(monkeypatch, FakeWandb(fail))
    result = train(_config(tiny, 2), tmp_path / "run")
    assert result.step == 2 and not result.stopped
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [0, 1, 2]   # step 0: validation
    warnings = [line for line in capfd.readouterr().err.splitlines() if "W&B" in line]
    what = ("could not start (PermissionError: wandb: invalid API key)" if fail == "init"
            else "logging failed (ConnectionError: api.wandb.ai: connection refused)")
    assert warnings == [f"warning: W&B {what}; the run goes on without W&B"]
    assert fake.logged == []


def test_wandb_missing_is_one_warning_line(tmp_path, tiny, scripted, monkeypatch, capfd):
    monkeypatch.setitem(sys.modules, "wandb", None)      # `import wandb` raises ImportError
    result = train(_config(tiny, 1), tmp_path / "run")
    assert result.step == 1
    assert [line for line in capfd.readouterr().err.splitlines() if "wandb" in line] == [
        "warning: logging.wandb: wandb is not installed (pip install 'codea1[wandb]'); the run goes on without W&B"]


def test_no_project_no_wandb(tmp_path, tiny, scripted, monkeypatch):
    fake = _use(monkeypatch, FakeWandb())
    train(load_config(preset="cpu-demo", overrides=tiny_overrides(tiny, "a1", 1)), tmp_path / "run")
    assert fake.inits == [] and not (tmp_path / "run" / RUN_ID_FILE).exists()


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                    reason="wandb is not installed (pip install 'codea1[wandb]')")
def test_real_wandb_offline_without_network(tmp_path, tiny, scripted, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    # any attempt to reach a server would fail at once
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    train(_config(tiny, 2), run, stop_after=1)
    train(None, run, resume=True)
    run_id = json.loads((run / RUN_ID_FILE).read_text())["id"]
    dirs = sorted((run / "wandb").glob(f"offline-run-*-{run_id}"))
    assert dirs, list((run / "wandb").iterdir())
    records = b"".join(p.read_bytes() for d in dirs for p in d.glob(f"run-{run_id}.wandb"))
    assert b"code/reward_mean" in records and b"judge/pass_rate" in records
    tables = [p for d in dirs for p in (d / "files" / "media" / "table").glob("samples_*.table.json")]
    assert len(tables) == 1
    assert json.loads(tables[0].read_text())["columns"] == SAMPLE_COLUMNS
