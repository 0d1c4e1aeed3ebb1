"""A run started when a bare `bundled-stdin` named all 25 bundled stdin problems, before it came
to name their train split (20; `bundled-stdin:all` names all 25 now), resumes. Before, `codea1
train --resume` loaded the models, then stopped with "the checkpoint's data position is for 25
problems, the training set now has 20: resume with the same data", naming neither the cause nor
a fix, and a resume may not change data.train. Now the checkpoint proves what the run trained
on: its config says `bundled-stdin`, it records no ids digest (runs started since the change
record one) and counts more problems than the train split holds. `codea1 train --resume` then
rewrites config.yaml to `bundled-stdin:all`, the same problems in the same order; the library's
resume refuses before loading a model, saying what to write."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from tiny_run import tiny_overrides
from typer.testing import CliRunner

from codea1.cli import app
from codea1.train.config import (ALL_STDIN, BARE_STDIN, ConfigError, as_started, check_run_config, load_config,
                                 migrate_bare_stdin, started_on_all_stdin)

torch.set_num_threads(1)


def _state(n: int, train: str = BARE_STDIN, heldout: str | None = None, digest: bool = False, **data) -> dict:
    config = load_config(preset="cpu-demo-stdin", overrides=[f"data.train={train}"]).model_dump(mode="json")
    config["data"].update(heldout=heldout, **data)
    position = {"epoch": 0, "index": 2, "n": n, **({"ids_sha256": "0" * 64} if digest else {})}
    return {"step": 1, "data": position, "config": config, "skipped_problems": []}


def test_the_checkpoint_tells_a_run_started_on_all_of_them():
    assert started_on_all_stdin(_state(25)) == (25, 20, 25)
    assert started_on_all_stdin(_state(23)) == (23, 20, 25)          # (over-long prompts dropped)
    assert started_on_all_stdin(_state(20)) is None                  # the train split: a run since the change
    assert started_on_all_stdin(_state(25, digest=True)) is None     # an ids digest: a run since the change
    assert started_on_all_stdin(_state(25, train=ALL_STDIN)) is None
    # data.include and the rows data.check=skip left out are counted as the run counted them
    assert started_on_all_stdin(_state(9, include=["stdin/00*"])) == (9, 8, 9)
    assert started_on_all_stdin(_state(8, include=["stdin/00*"])) is None
    assert started_on_all_stdin({**_state(24), "skipped_problems": ["stdin/001-sum-of-numbers"]}) == (24, 19, 24)


def test_the_library_resume_says_what_to_write():
    state = _state(25, heldout=BARE_STDIN)
    raw = dict(state["config"])
    with pytest.raises(ConfigError, match=r"config.yaml: data.train 'bundled-stdin' named all 25 bundled stdin "
                                          r"problems when this run was started .* train split \(20\) now.* Write "
                                          r"data.train: bundled-stdin:all and data.heldout: bundled-stdin:all in"):
        check_run_config(raw, "run/config.yaml", state)
    check_run_config(as_started(raw), "run/config.yaml", state)       # what it named then: taken
    half = {**raw, "data": {**raw["data"], "train": ALL_STDIN}}       # the held-out set still bare
    with pytest.raises(ConfigError, match=r"'data.heldout' is 'bundled-stdin' but .* 'bundled-stdin:all'"):
        check_run_config(half, "run/config.yaml", state)
    # a run started since the change trained on the train split: `:all` is another set
    since = _state(20)
    check_run_config(dict(since["config"]), "run/config.yaml", since)
    with pytest.raises(ConfigError, match=r"'data.train' is 'bundled-stdin:all' but"):
        check_run_config(as_started(since["config"]), "run/config.yaml", since)


def test_migrate_rewrites_only_such_a_run(tmp_path):
    path = tmp_path / "config.yaml"
    state = _state(25, heldout=BARE_STDIN)
    path.write_text(yaml.safe_dump(state["config"], sort_keys=False))
    assert migrate_bare_stdin(path, _state(20, heldout=BARE_STDIN)) is None
    assert yaml.safe_load(path.read_text()) == state["config"]
    said = migrate_bare_stdin(path, state)
    assert said.startswith(f"{path}: now says data.train: bundled-stdin:all and data.heldout: bundled-stdin:all")
    assert yaml.safe_load(path.read_text()) == as_started(state["config"])
    assert migrate_bare_stdin(path, state) is None                     # done once


def _legacy_run(tmp_path, tiny) -> tuple:
    """A tiny golden-mode run of one step on all 25 stdin problems, then made into what an
    older codea1 left: config.yaml and the checkpoint's config say a bare `bundled-stdin`,
    and its data position has no ids digest."""
    from codea1.train.loop import train

    cfg = load_config(preset="cpu-demo", overrides=[*tiny_overrides(tiny, "golden", 1), f"data.train={ALL_STDIN}",
                                                    "data.heldout=null", "validation.every=0", "data.check=off"])
    run = tmp_path / "run"
    assert train(cfg, run).step == 1
    raw = yaml.safe_load((run / "config.yaml").read_text())
    raw["data"]["train"] = BARE_STDIN
    (run / "config.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    state_file = run / "checkpoints" / "step-1" / "state.json"
    state = json.loads(state_file.read_text())
    state["config"]["data"]["train"] = BARE_STDIN
    del state["data"]["ids_sha256"]
    state_file.write_text(json.dumps(state))
    return run, state


def test_a_run_started_on_bare_bundled_stdin_resumes(tmp_path, tiny):
    run, state = _legacy_run(tmp_path, tiny)
    assert state["data"]["n"] == 25
    result = CliRunner().invoke(app, ["train", "--resume", str(run), "--steps", "2"])
    assert result.exit_code == 0, result.output
    assert "now says data.train: bundled-stdin:all" in result.stderr
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["train"] == ALL_STDIN
    after = json.loads((run / "checkpoints" / "step-2" / "state.json").read_text())
    assert after["data"]["n"] == 25 and after["config"]["data"]["train"] == ALL_STDIN


def test_a_run_the_migration_leaves_alone_is_as_it_was(tmp_path):
    """A run started since the change (its bare `bundled-stdin` is the train split): config.yaml
    untouched, and no lock file left behind (a refused resume leaves the directory as it was)."""
    from codea1.train.cli import migrate_bare_stdin_run

    state = _state(20)
    (tmp_path / "checkpoints" / "step-1").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-1" / "state.json").write_text(json.dumps(state))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(state["config"], sort_keys=False))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert migrate_bare_stdin_run(tmp_path) is None
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    (tmp_path / "checkpoints" / "step-1" / "state.json").write_text(json.dumps(_state(25)))
    assert migrate_bare_stdin_run(tmp_path).startswith(f"{tmp_path / 'config.yaml'}: now says data.train")
