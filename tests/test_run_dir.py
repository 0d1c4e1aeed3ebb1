"""The run directory's promises: a foreign folder is refused untouched, a full disk is
named with its own exit code and loses nothing, broken training rows are caught before the
models load, a resume may change the settings no figure depends on, and the time limit's
arithmetic."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from conftest import fill_disk
from tiny_run import tiny_overrides
from typer.testing import CliRunner

from codea1.cli import EXIT_DISK_FULL, app, explain
from codea1.train.config import ConfigError, load_config
from codea1.train.loop import train
from codea1.train.metrics import read_metrics

torch.set_num_threads(1)
runner = CliRunner()


def _config(tiny, steps=2, *extra):
    return load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, "a1", steps), "validation.every=0",
                                                     "logging.tensorboard=false", *extra])


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}




@pytest.mark.parametrize("files", [
    {"notes.txt": "my own notes\n", "sub/data.csv": "a,b\n"},
    {"config.yaml": "name: my project\nversion: 2\n", "main.py": "print('hi')\n"},
    {"config.yaml": "steps: 3\n", "main.py": "print('hi')\n"},  # codea1 keys, not a run's whole config
], ids=["own-files", "own-config-yaml", "partial-codea1-config"])
def test_a_foreign_non_empty_folder_is_refused_and_left_untouched(tiny, tmp_path, files):
    """Faults tried: the old check (only metrics.jsonl, samples.jsonl, mistakes.sqlite
    counted) accepted the first folder and filled it; any config.yaml made a folder a run,
    and the new run replaced the project's own."""
    mine = tmp_path / "mine"
    for name, text in files.items():
        (mine / name).parent.mkdir(parents=True, exist_ok=True)
        (mine / name).write_text(text)
    before = _snapshot(mine)
    sets = [x for o in tiny_overrides(tiny) for x in ("--set", o)]
    result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(mine), *sets])
    assert result.exit_code == 2, result.output
    assert "is not empty and not a codea1 run" in result.output
    assert all(name.split("/")[0] in result.output for name in files)
    assert ("config.yaml is not a codea1 run's" in result.output) == ("config.yaml" in files)
    assert _snapshot(mine) == before


def test_a_run_of_an_earlier_version_is_still_a_run(tiny, tmp_path):
    """A run written before a config key existed lacks it in config.yaml; beside its
    checkpoints it is still a run: a new run there is told to resume it, not that the
    folder is not a run (fault found by review: the whole-config rule alone said so)."""
    run = tmp_path / "run"
    train(_config(tiny, 1), run)
    cfg_path = run / "config.yaml"
    cfg_path.write_text("\n".join(x for x in cfg_path.read_text().splitlines() if not x.strip().startswith("stop:")))
    sets = [x for o in tiny_overrides(tiny) for x in ("--set", o)]
    result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(run), *sets])
    assert result.exit_code != 0
    assert "already holds a run; use --resume" in result.output and "not a codea1 run" not in result.output


def test_resume_takes_settings_no_figure_depends_on_and_names_them_when_refusing(tiny, tmp_path):
    """`--resume RUN --set threads=2 --set logging.progress=none` is taken and recorded in
    config.yaml, and the run goes on as if nothing changed; `--set grpo.lr=...` is refused
    with the list of keys that may change. Fault tried: the old rule (only --steps) refused
    threads."""
    run, straight = tmp_path / "run", tmp_path / "straight"
    train(_config(tiny, 2), straight)
    train(_config(tiny, 2), run, stop_after=1)
    cfg_path = run / "config.yaml"
    changed = load_config(path=cfg_path, overrides=["threads=2", "logging.progress=none", "judge.workers=1"])
    assert train(changed, run, resume=True).step == 2
    saved = load_config(path=cfg_path)
    assert saved.threads == 2 and saved.judge.workers == 1 and saved.logging.progress == "none"

    def stable(rows):
        return [{k: v for k, v in r.items() if not k.startswith("time/") and "per_s" not in k} for r in rows]
    assert stable(read_metrics(run)) == stable(read_metrics(straight))
    with pytest.raises(ConfigError, match=r"'grpo.lr' .* only --steps, and with --set: threads, judge.workers"):
        train(load_config(path=cfg_path, overrides=["grpo.lr=0.5"]), run, resume=True, steps=3)
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.lr=0.5"])
    assert result.exit_code == 2 and "threads" in result.output and "logging.progress" in result.output
    result = runner.invoke(app, ["train", "--resume", str(run), "--preset", "cpu-demo"])
    assert result.exit_code == 2 and "threads" in result.output


def _broken_data(tiny, tmp_path) -> Path:
    rows = [json.loads(line) for line in Path(tiny["train"]).read_text().splitlines()]
    rows[1]["reference"] = "def is_even(n:\n    return n % 2 == 0\n"   # does not even parse
    path = tmp_path / "broken.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_broken_reference_is_refused_before_the_models_load(tiny, tmp_path, monkeypatch):
    """data.check=refuse (the default): one error naming the row, in about a second, before
    any model loads and before the run directory exists; data.check=skip trains without it,
    saying so, and a resume keeps it out. Fault tried: no check (the run started, as the
    issue found)."""
    import time

    import codea1.models as models

    data = _broken_data(tiny, tmp_path)
    real_load = models.load_policies

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded before the data was checked")

    monkeypatch.setattr(models, "load_policies", no_loading)
    t = time.monotonic()
    with pytest.raises(ValueError, match=r"1 of 5 problems have a broken reference.*\nT/even: .*SyntaxError"):
        train(_config(tiny, 1, f"data.train={data}"), tmp_path / "refused")
    assert time.monotonic() - t < 30
    assert not (tmp_path / "refused").exists()
    monkeypatch.setattr(models, "load_policies", real_load)
    run = tmp_path / "skip"
    result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(run), *[
        x for o in [*tiny_overrides(tiny, "a1", 2), f"data.train={data}", "data.check=skip", "validation.every=0",
                    "logging.progress=plain"] for x in ("--set", o)]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "data.train: skipped T/even: " in result.output
    from codea1.train.checkpoint import read_state

    assert read_state(run / "checkpoints" / "step-2")["skipped_problems"] == ["T/even"]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s.get("problem_id") != "T/even" for s in samples)


def test_a_full_disk_mid_run_names_the_file_and_loses_nothing(tiny, tmp_path, small_disk):
    """The disk fills after step 1: step 2's Mistake Book commit fails with DiskFull naming
    mistakes.sqlite (exit code 3 on the command line, not the bad-input code), step 1's
    checkpoint and metrics are whole, and once space is freed the resume ends as an
    uninterrupted run. Fault tried: the old book (its rollback error hid the cause:
    "not a Mistake Book (cannot rollback ...)")."""
    from codea1.output_files import DiskFull
    from codea1.train.checkpoint import verify_checkpoint

    run, straight = small_disk / "run", tmp_path / "straight"
    train(_config(tiny, 2, "checkpoint.keep=1"), straight)
    fill = {}

    def fill_after_step_1(step, _metrics):
        if step == 1:
            fill["file"] = fill_disk(small_disk)

    with pytest.raises(DiskFull) as caught:
        train(_config(tiny, 2, "checkpoint.keep=1"), run, on_step=fill_after_step_1)
    assert caught.value.filename == str(run / "mistakes.sqlite")
    code, message = explain(caught.value)
    assert code == EXIT_DISK_FULL == 3 and "no space left on device (the disk is full)" in message
    assert verify_checkpoint(run / "checkpoints" / "step-1")["step"] == 1
    assert [r["step"] for r in read_metrics(run)] == [1]
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]
    fill["file"].unlink()
    assert train(None, run, resume=True).step == 2

    def stable(rows):
        return [{k: v for k, v in r.items() if not k.startswith("time/") and "per_s" not in k} for r in rows]
    assert stable(read_metrics(run)) == stable(read_metrics(straight))


def test_data_convert_on_a_full_disk_names_the_file_and_keeps_the_old_one(small_disk):
    """Fault tried: the old message, "[Errno 28] No space left on device" naming no file."""
    out = small_disk / "demo.jsonl"
    out.write_text("the old file\n")
    filler = fill_disk(small_disk)
    result = runner.invoke(app, ["data", "convert", "bundled:all", str(out)])
    assert result.exit_code == 3, result.output
    assert f"{out}: no space left on device (the disk is full)" in result.output
    assert out.read_text() == "the old file\n"
    assert sorted(p.name for p in small_disk.iterdir()) == ["demo.jsonl", "filler"]
    filler.unlink()


def test_the_time_budget_refuses_what_cannot_finish():
    """The arithmetic of --time-limit: a step or the rest of one that would end past the
    deadline is refused with what it needs and what is left; nothing is refused without a
    limit, and a new run's first step (nothing measured) is judged at its commit point by
    its own first half."""
    from codea1.train.stopping import TimeBudget

    now = [100.0]
    budget = TimeBudget(deadline=160.0, clock=lambda: now[0])
    assert budget.refuse_step(1, validates=False) is None   # nothing measured: the step starts
    assert budget.refuse_commit(1, before_commit_s=50.0) is None   # 50 s more fits in 60
    assert "needs about 1 min 10 s and 1 min 0 s are left" in budget.refuse_commit(1, before_commit_s=70.0)
    budget.learn([{"step": 0, "time/validation_s": 30.0},
                  {"step": 1, "time/step_s": 40.0, "time/update_s": 15.0, "time/mistake_book_s": 1.0}])
    assert budget.refuse_step(2, validates=False) is None
    assert budget.refuse_step(2, validates=True).startswith("time limit: step 2 needs about 1 min 10 s")
    assert budget.refuse_commit(2, before_commit_s=500.0) is None   # measured: 16 s after the commit
    now[0] = 150.0
    assert budget.refuse_step(2, validates=False) is not None
    assert TimeBudget(None).refuse_step(5, validates=True) is None


def test_the_time_budget_on_hand_computed_edges():
    """What `benchmarks/mutation_score.py --only time_budget` found untested: the estimate
    after the commit point is the Mistake Book's time plus the update's; a missing or
    non-finite figure counts as 0; a row without a step number is the validation before the
    first step; the checkpoint's time is added to what a part needs; a part that exactly
    fits is started; nothing to do is never refused, even past the deadline; times are
    printed rounded up, never below 0."""
    from codea1.train.stopping import TimeBudget, _fmt

    assert (_fmt(0), _fmt(-3.0), _fmt(0.2), _fmt(60), _fmt(61.5)) == ("0 s", "0 s", "1 s", "1 min 0 s", "1 min 2 s")
    now = [100.0]
    budget = TimeBudget(deadline=250.0, clock=lambda: now[0])
    assert budget.left() == 150.0
    budget.learn([{"time/step_s": 99.0, "time/validation_s": 7.0},     # no step: the validation before step 1
                  {"step": 1, "time/step_s": 40.0, "time/update_s": 15.0, "time/mistake_book_s": 1.5},
                  {"step": 2, "time/step_s": float("nan"), "time/update_s": 20.0}])   # no Mistake Book figure
    assert (budget.step_s, budget.after_commit_s, budget.validation_s) == (40.0, 20.0, 7.0)
    budget.record("checkpoint_s", 20.0)
    budget.record("checkpoint_s", 5.0)                                  # the longest is kept
    assert budget.checkpoint_s == 20.0
    now[0] = 190.0                                                      # 60 s left
    assert budget.refuse_step(3, validates=False) is None               # 40 + 20 fits exactly
    now[0] = 190.5
    assert budget.refuse_step(3, validates=False).endswith("needs about 1 min 0 s and 59 s are left")
    now[0] = 190.0
    assert budget.refuse_step(3, validates=True) == "time limit: step 3 needs about 1 min 7 s and 1 min 0 s are left"
    assert budget.refuse("the validation after step 3", 40.5).startswith(
        "time limit: the validation after step 3 needs about 1 min 1 s")
    assert budget.refuse("x", 0.5) is None
    now[0] = 249.9
    assert budget.refuse("x", 0.5) is not None                          # under a second still counts
    now[0] = 300.0                                                      # past the deadline
    assert budget.refuse("nothing", 0.0) is None
    assert budget.refuse_commit(3, before_commit_s=1.0).endswith("needs about 40 s and 0 s are left")


@pytest.mark.parametrize("stop_at", [2, 3], ids=["mid-run", "the-last-step"])
def test_a_stop_during_a_later_validation_resumes_to_an_uninterrupted_runs_files(tiny, tmp_path, monkeypatch, stop_at):
    """A stop while the validation after step 2 (or the last step, 3) runs: the validation is
    dropped and the step's row and samples wait in the checkpoint (state.json's "pending");
    the resume validates and writes them, and metrics.jsonl, samples.jsonl and the last
    checkpoint's state end as an uninterrupted run's. Found by `kill_trials.py --signal
    SIGINT --set validation.every=2`: samples.jsonl's fields came back from state.json in
    sorted order; after the last step the resume wrote no checkpoint, so the run's last one
    still held the row pending (a later resume would validate it again)."""
    from crash_harness import differences, fingerprint

    from codea1.train.checkpoint import CheckpointManager, read_state
    from codea1.train.loop import Trainer

    cfg = _config(tiny, 3, "validation.every=2", "validation.at_end=true", "checkpoint.keep=1")
    straight = tmp_path / "straight"
    train(cfg, straight)

    validate, stopped = Trainer.validate, []

    def stop_there(self):
        if self.step == stop_at and not stopped:
            stopped.append(self.step)
            self.stop.request("SIGINT")  # (raises StopRequested: the validation is abandonable)
        return validate(self)

    run = tmp_path / "run"
    monkeypatch.setattr(Trainer, "validate", stop_there)
    assert train(cfg, run).step == stop_at
    monkeypatch.setattr(Trainer, "validate", validate)
    assert stopped == [stop_at]
    state = read_state(run / "checkpoints" / f"step-{stop_at}")
    assert state["pending"]["step"] == stop_at and state["pending"]["samples"]
    assert [r["step"] for r in read_metrics(run)] == list(range(stop_at))

    assert train(None, run, resume=True).step == 3
    assert (run / "samples.jsonl").read_bytes() == (straight / "samples.jsonl").read_bytes()
    assert read_state(CheckpointManager(run).latest())["pending"] is None
    # weights, optimisers, random state, Mistake Book, state.json, metrics, samples, the listing
    assert differences(fingerprint(run), fingerprint(straight)) == []


def test_a_crash_while_the_resume_saves_the_stopped_step_again_loses_nothing(tiny, tmp_path, monkeypatch):
    """The resume above saves step 3's checkpoint again (its row no longer pending). Killed
    between setting the old step-3 aside and renaming the new one in, the run holds only
    `.replaced-step-3`: the next resume reads it as step 3 and ends as an uninterrupted run."""

    from crash_harness import differences, fingerprint

    from codea1.train.loop import Trainer

    cfg = _config(tiny, 3, "validation.every=2", "validation.at_end=true", "checkpoint.keep=1")
    train(cfg, tmp_path / "straight")
    validate = Trainer.validate

    def stop_at_3(self):
        if self.step == 3:
            self.stop.request("SIGINT")
        return validate(self)

    run = tmp_path / "run"
    monkeypatch.setattr(Trainer, "validate", stop_at_3)
    train(cfg, run)
    monkeypatch.setattr(Trainer, "validate", validate)
    real, renamed = os.replace, []

    def killed_mid_save(src, dst):
        renamed.append(Path(dst).name)
        if renamed[-2:] == [".replaced-step-3", "step-3"]:
            raise KeyboardInterrupt("killed")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", killed_mid_save)
    with pytest.raises(KeyboardInterrupt):
        train(None, run, resume=True)
    monkeypatch.setattr(os, "replace", real)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [".replaced-step-3"]
    assert train(None, run, resume=True).step == 3
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-3"]
    assert differences(fingerprint(run), fingerprint(tmp_path / "straight")) == []


def test_a_resume_on_reordered_training_data_is_refused_in_one_line(tiny, tmp_path):
    """The same problems in another order would draw another sequence: `--resume` is refused
    with one `error:` line and the run is left as it was. Fault tried: the trainer built its
    sampler without the ids (the resume went on in silence)."""
    data, run = tmp_path / "train.jsonl", tmp_path / "run"
    lines = Path(tiny["train"]).read_text().splitlines(keepends=True)
    data.write_text("".join(lines))
    train(_config(tiny, 3, f"data.train={data}"), run, stop_after=1)
    data.write_text("".join(lines[::-1]))
    before = _snapshot(run)
    result = runner.invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 2, result.output
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "other training problems" in error[0], result.output
    kept = ("config.yaml", "metrics.jsonl", "samples.jsonl", "checkpoints")
    assert {k: v for k, v in _snapshot(run).items() if k.startswith(kept)} == \
        {k: v for k, v in before.items() if k.startswith(kept)}


def test_a_new_total_from_set_or_config_yaml_is_held_to_the_steps_rules(tiny, tmp_path):
    """`--resume RUN --set steps=N`, or `steps:` edited in config.yaml, is `--steps N`: at
    or below the step the run is at it is refused in one line and nothing changes; above
    it the run is extended with the line that says the LR schedule now spans N steps.
    Fault tried: `steps` passed as a plain changeable key (steps=2 at step 3 exited 0 and
    wrote `steps: 2`; steps=4 extended without the line)."""
    run = tmp_path / "run"
    train(_config(tiny, 3), run)
    cfg_path = run / "config.yaml"
    text = cfg_path.read_text()
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "steps=2"])
    assert result.exit_code == 2, result.output
    assert f"error: --set steps=2: {run} is already at step 3 (of 3); give a total above 3, or no --set steps " \
        "to run to 3" in result.output.replace("\n", " ").replace("  ", " ")
    assert cfg_path.read_text() == text
    assert "\nsteps: 3\n" in text
    cfg_path.write_text(text.replace("\nsteps: 3\n", "\nsteps: 2\n"))
    result = runner.invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 2, result.output
    assert f"error: steps: 2 in {cfg_path}: {run} is already at step 3 (of 3)" in result.output
    assert "or set it back to 3" in result.output
    cfg_path.write_text(text)
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "steps=4",
                                 "--set", "logging.progress=plain"])
    assert result.exit_code == 0, result.output
    assert f"steps 3 -> 4, recorded in {cfg_path}; the LR schedule now spans 4 steps" in result.output
    assert load_config(path=cfg_path).steps == 4
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3, 4]


@pytest.mark.parametrize("bad", ["data.problems_per_step=100", "rollout.code.max_prompt_tokens=5", "model.name"])
def test_a_new_run_refused_after_the_checks_leaves_its_directory_as_it_was(tiny, tmp_path, bad):
    """Bad input found only once the models load (more problems a step than the data holds,
    every prompt too long), or a folder that is not a model (now found before anything is
    written): exit 2, and the new run's directory
    does not exist afterwards; in a crashed first attempt's directory its config.yaml is back
    as it was. Fault tried: config.yaml and train.lock stayed, and `--resume` repeated the error."""
    if bad == "model.name":
        (tmp_path / "not-a-model").mkdir()
        (tmp_path / "not-a-model" / "notes.txt").write_text("no weights here\n")
        bad = f"model.name={tmp_path / 'not-a-model'}"
    sets = [x for o in [*tiny_overrides(tiny), bad] for x in ("--set", o)]
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(run), *sets])
    assert result.exit_code == 2, result.output
    assert not run.exists(), sorted(p.name for p in run.iterdir())
    crashed = tmp_path / "crashed"  # a first attempt killed before its first checkpoint
    crashed.mkdir()
    from codea1.train.config import save_config

    save_config(_config(tiny, 2), crashed / "config.yaml")
    # (its metrics: none, or a step it logged before it died; found by review: a logged
    # step of the crashed attempt was taken for one of the new run's, and nothing undone)
    for logged in ("", '{"step": 1}\n'):
        (crashed / "metrics.jsonl").write_text(logged)
        before = _snapshot(crashed)
        result = runner.invoke(app, ["train", "--preset", "cpu-demo", "--run-dir", str(crashed), *sets])
        assert result.exit_code == 2, result.output
        assert _snapshot(crashed) == before


def test_a_new_run_in_a_crashed_first_attempts_directory_drops_its_tensorboard_events(tiny, tmp_path):
    """A first attempt killed before its first checkpoint leaves config.yaml and TensorBoard
    events for steps the new run trains again: they go, as its Mistake Book does. Fault
    tried: the events were purged on resume only, so TensorBoard showed both attempts."""
    from torch.utils.tensorboard import SummaryWriter

    from codea1.train.config import save_config

    run = tmp_path / "run"
    run.mkdir()
    cfg = _config(tiny, 1, "logging.tensorboard=true")
    save_config(cfg, run / "config.yaml")
    old = SummaryWriter(log_dir=str(run / "tb"))
    old.add_scalar("reward/code/mean", 123.0, 1)
    old.close()
    stale = set((run / "tb").iterdir())
    assert train(cfg, run).step == 1
    left = set((run / "tb").iterdir())
    assert left and not left & stale
