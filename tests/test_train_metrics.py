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
    assert first == "step 1 of 10: code rollout"
    assert line.startswith("step 1 of 10 done |") and "code reward 0.500" in line and "attack rate 25%" in line
    assert "tok/s 80.0" in line and "eta" in line


def test_rich_progress_renders_step_phase_and_figures():
    out = io.StringIO()
    p = Progress(4, style="rich", stream=out)
    p.set_phase("test rollout", 2)
    p.step_done(2, {"code/reward_mean": 0.75, "mistakes/size": 12, "val/code_pass_rate": 0.5})
    p.close()
    text = out.getvalue()
    assert "step 3 of 4 (2 done)" in text and "code reward" in text and "0.750" in text
    assert "mistake book" in text and "val/code_pass_rate" in text


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def status_line(p: Progress) -> str:
    """The display's text, as it reads now, on one line (was `Progress.status_line`)."""
    return f"{p.steps_text()} | {p.time_text()} | {p.phase_text()}"


def test_the_update_names_its_part_on_the_display():
    """`Progress.update_parts` is the `show` the update calls with each part it starts."""
    p = Progress(10, style="rich", stream=io.StringIO(), clock=FakeClock())
    try:
        p.set_phase("update", 1)
        show = p.update_parts("test", 12)
        show("old log-probs")
        assert "test model, 12 sequences: old log-probs" in status_line(p)
        show("gradient steps")
        assert "test model, 12 sequences: gradient steps" in status_line(p)
    finally:
        p.close()


def test_live_display_moves_within_a_phase():
    """The picture is rebuilt at each refresh: the phase's elapsed time, the run's elapsed
    time, the ETA and the phase's own progress change while one phase runs."""
    clock, out = FakeClock(), io.StringIO()
    p = Progress(10, style="rich", stream=out, clock=clock)
    try:
        p.set_phase("loading the models")
        clock.now += 45
        assert "loading the models 00:45" in status_line(p)
        assert "ETA after the first step" in status_line(p)
        p.set_phase("code rollout", 1)
        clock.now += 300
        p.step_done(1, {})          # step 1 took 300 s
        p.set_phase("code rollout", 2)
        tokens = [0]
        p.watch(lambda: f"{tokens[0]:,} tokens sampled")
        first = status_line(p)
        clock.now += 60
        tokens[0] = 1234
        later = status_line(p)
        assert "code rollout 00:00" in first and "code rollout 01:00" in later
        assert "ETA 45:00" in first and "ETA 44:00" in later   # 9 steps x 300 s, counting down
        assert "0 tokens sampled" in first and "1,234 tokens sampled" in later
        assert "elapsed 05:45" in first and "elapsed 06:45" in later
        clock.now += 1000           # a slow step: never below the 8 whole steps after it
        assert "ETA 40:00" in status_line(p)
        # what rich's Live draws at each refresh is rebuilt now, not frozen at the last phase change
        from rich.console import Console

        drawn = io.StringIO()
        Console(file=drawn, width=200).print(p._live.get_renderable())
        assert "code rollout 17:40" in drawn.getvalue() and "ETA 40:00" in drawn.getvalue()
    finally:
        p.close()
