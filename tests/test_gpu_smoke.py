"""`benchmarks/gpu_smoke.py`: refuses in one line without CUDA, and its `--cpu-dry-run` runs
the very phases a GPU machine runs (lora-shared, full weights under FSDP2 on one rank) on
the CPU: two real training steps each, with finite losses and real gradients."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_smoke.py"


@pytest.fixture(scope="module")
def smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_it_says_so_in_one_line_and_fails(smoke, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert smoke.main([]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.splitlines()) == 1
    assert out.err.startswith("gpu_smoke: no CUDA device here") and "--cpu-dry-run" in out.err


def test_a_report_that_did_not_train_is_a_failure(smoke):
    good = {"phase": "full-fsdp2", "steps_done": 2, "fsdp2": [{"world": 1}],
            "steps": [{"step": s, "code_loss": -1.0, "test_loss": 0.5} for s in (1, 2)]}
    assert smoke.healthy(good) == []
    assert smoke.healthy({**good, "fsdp2": []}) == ["FSDP2 sharding calls: []"]
    assert smoke.healthy({**good, "phase": "lora-shared"}) == ["FSDP2 sharding calls: [{'world': 1}]"]
    nan = {**good, "steps": [good["steps"][0], {"step": 2, "code_loss": float("nan"), "test_loss": 0.5}]}
    assert smoke.healthy(nan) == ["step 2: code loss nan"]
    assert smoke.healthy({**good, "steps_done": 1, "steps": good["steps"][:1]}) == ["trained 1 of 2 steps"]


def test_the_cpu_dry_run_trains_both_modes_for_two_steps(smoke, tmp_path, capsys):
    report = tmp_path / "smoke.json"
    code = smoke.main(["--cpu-dry-run", "--hidden-size", "32", "--max-new-tokens", "8", "--problems", "1",
                       "--skip-sandbox", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    assert data["failures"] == [] and [p["phase"] for p in data["phases"]] == ["lora-shared", "full-fsdp2"]
    for phase in data["phases"]:
        assert [s["step"] for s in phase["steps"]] == [1, 2] and phase["peak_mib"] > 0
        for s in phase["steps"]:
            for role in ("code", "test"):
                assert math.isfinite(s[f"{role}_loss"]) and s[f"{role}_grad_norm"] > 0   # a real gradient
            assert s["rollout_tokens_per_s"] > 0 and s["update_tokens_per_s"] > 0
    lora, full = data["phases"]
    # on a CPU each phase's peak is its own process's ru_maxrss: at least torch and a model,
    # at most the largest of this process's finished children
    import resource
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert lora["peak_kind"] == full["peak_kind"] == "RSS"
    assert all(200 < p["peak_mib"] <= children for p in (lora, full)), (lora["peak_mib"], full["peak_mib"], children)
    assert lora["fsdp2"] == []
    assert full["fsdp2"] == [{"world": 1, "compute_dtype": "float32", "master_dtype": "float32"}]
    assert "FSDP2: 1 rank, float32 master weights" in out and "gpu_smoke: passed" in out
