"""metrics.jsonl / samples.jsonl / TensorBoard writing, resume truncation, progress display."""

from __future__ import annotations

import io
import json
import math

import pytest

from codea1.train.metrics import MetricsLog, Progress, read_metrics


def test_log_rows_samples_and_tensorboard(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=True)
    log.log(1, {"code/reward_mean": 0.25, "val/test_kill_rate": float("nan"), "note": "x"})
    log.log_samples(1, [{"role": "code", "text": "def f(): pass"}])
    log.close()
    rows = read_metrics(tmp_path)
    assert rows == [{"step": 1, "code/reward_mean": 0.25, "val/test_kill_rate": None, "note": "x"}]
    sample = json.loads((tmp_path / "samples.jsonl").read_text())
    assert sample == {"step": 1, "role": "code", "text": "def f(): pass"}
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_resume_offsets_cut_what_came_after_the_checkpoint(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log(1, {"a": 1.0})
    log.log_samples(1, [{"t": "one"}])
    offsets = log.offsets()
    log.log(2, {"a": 2.0})            # written after the checkpoint, then the run crashed
    log.log_samples(2, [{"t": "two"}])
    log.close()
    again = MetricsLog(tmp_path, tensorboard=False, offsets=offsets)
    again.log(2, {"a": 2.5})
    again.close()
    assert [r["a"] for r in read_metrics(tmp_path)] == [1.0, 2.5]
    assert "two" not in (tmp_path / "samples.jsonl").read_text()
    with pytest.raises(ValueError, match="shorter"):
        MetricsLog(tmp_path, tensorboard=False, offsets={"metrics": 10**6, "samples": 0})


def test_float_values_round_trip_exactly(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    value = 0.1 + 0.2
    log.log(1, {"x": value})
    log.close()
    assert read_metrics(tmp_path)[0]["x"] == value and not math.isnan(value)


def test_plain_progress_prints_one_line_per_step():
    out = io.StringIO()
    p = Progress(10, style="plain", stream=out)
    p.set_phase("code rollout", 1)
    p.step_done(1, {"code/reward_mean": 0.5, "judge/attack_rate": 0.25, "rollout/tokens_per_s": 80.0})
    p.close()
    first, line = out.getvalue().strip().splitlines()
    assert first == "step 1/10: code rollout"
    assert line.startswith("step 1/10") and "code reward 0.500" in line and "attack rate 25%" in line
    assert "tok/s 80.0" in line and "eta" in line


def test_rich_progress_renders_step_phase_and_figures():
    out = io.StringIO()
    p = Progress(4, style="rich", stream=out)
    p.set_phase("test rollout", 2)
    p.step_done(2, {"code/reward_mean": 0.75, "mistakes/size": 12, "val/code_pass_rate": 0.5})
    p.close()
    text = out.getvalue()
    assert "step 2/4 done" in text and "code reward" in text and "0.750" in text
    assert "mistake book" in text and "val/code_pass_rate" in text
