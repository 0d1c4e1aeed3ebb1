"""The training config (presets, overrides, errors) and the atomic checkpoint directory."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from codea1.train.checkpoint import CheckpointManager, capture_rng, read_state, restore_rng, write_json
from codea1.train.config import PRESETS, ConfigError, load_config, save_config


# ------------------------------------------------------------------ config


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads(name):
    cfg = load_config(preset=name)
    assert cfg.mode == "a1"
    assert cfg.grpo.clip_low == 0.2 and cfg.grpo.clip_high == 0.28 and cfg.grpo.kl_coef == 0.001


def test_paper_presets_carry_the_reference_hyperparameters():
    for name in ("paper-1.5b", "paper-3b", "paper-7b"):
        c = load_config(preset=name)
        assert c.data.problems_per_step == 256 and c.rollout.n_code == 8 and c.rollout.n_test == 8
        assert c.rollout.code.temperature == 1.0 and c.rollout.code.top_p == 1.0
        g = c.grpo
        assert (g.lr, g.weight_decay, g.warmup_steps, g.grad_clip, g.ppo_epochs, g.mini_batches,
                g.update_n) == (1e-6, 0.1, 10, 1.0, 1, 2, 1)
        assert c.judge.alpha == 0.5 and c.judge.suite_size == 8
        assert c.model.mode == "full" and "Qwen2.5-Coder" in c.model.name


def test_cpu_demo_is_small_lora_shared_offline():
    c = load_config(preset="cpu-demo")
    assert c.model.name == "qwen2.5-coder-0.5b-instruct" and c.model.mode == "lora-shared"
    assert c.model.dtype == "auto" and c.data.train == "bundled:demo" and c.data.include is None
    assert c.data.problems_per_step * c.rollout.n_code * c.rollout.n_test <= 64


def test_overrides_yaml_and_file_layering(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("grpo:\n  lr: 3.0e-6\nrollout:\n  n_code: 2\n")
    c = load_config(path=f, preset="cpu-demo", overrides=["rollout.n_code=5", "data.heldout=null",
                                                          "grpo.betas=[0.9, 0.95]"])
    assert c.grpo.lr == 3e-6 and c.rollout.n_code == 5 and c.data.heldout is None
    assert c.grpo.betas == (0.9, 0.95) and c.model.mode == "lora-shared"
    out = tmp_path / "saved.yaml"
    save_config(c, out)
    assert load_config(out) == c


@pytest.mark.parametrize("override, message", [
    ("grpo.lrr=1", "unknown config key 'grpo.lrr'.*did you mean 'grpo.lr'"),
    ("grpo.lr=-1", "'grpo.lr': Input should be greater than 0"),
    ("mode=foo", "'mode'.*'a1', 'golden' or 'selfplay'"),
    ("rollout.code.max_new_tokens=lots", "rollout.code.max_new_tokens"),
    ("no_equals_sign", "expected KEY=VALUE"),
    ("grpo.lr.x=1", "'grpo.lr' is a value, not a section"),
])
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(preset="cpu-demo", overrides=[override])


def test_bad_files_and_presets(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'cpu-demo'"):
        load_config(preset="cpu-dem")
    with pytest.raises(ConfigError, match="not found"):
        load_config(path=tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="bad.yaml: expected a mapping"):
        load_config(path=bad)
    bad.write_text("rollout:\n  n_cod: 3\n")
    with pytest.raises(ConfigError, match="bad.yaml: unknown config key 'rollout.n_cod'"):
        load_config(path=bad)


def test_selfplay_mode_switches_the_model_to_one_set_of_weights():
    assert load_config(preset="cpu-demo", overrides=["mode=selfplay"]).model.selfplay_weights == "lora"
    assert load_config(preset="paper-3b", overrides=["mode=selfplay"]).model.selfplay_weights == "full"
    with pytest.raises(ConfigError, match="use mode 'selfplay'"):
        load_config(preset="cpu-demo", overrides=["model.mode=selfplay"])


# ------------------------------------------------------------------ checkpoints


def _writer(step, payload="x"):
    def write(d):
        (d / "weights.bin").write_text(payload * 10)
        write_json(d / "state.json", {"step": step})
    return write


def test_save_keeps_the_last_k(tmp_path):
    m = CheckpointManager(tmp_path, keep=2)
    for s in (1, 2, 3, 4):
        m.save(s, _writer(s))
    assert [s for s, _ in m.list()] == [3, 4]
    assert read_state(m.latest()) == {"step": 4}
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_a_failing_write_leaves_the_last_good_checkpoint(tmp_path):
    m = CheckpointManager(tmp_path, keep=3)
    m.save(1, _writer(1, "good"))

    def broken(d):
        (d / "weights.bin").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        m.save(2, broken)
    assert [s for s, _ in m.list()] == [1]
    assert (m.latest() / "weights.bin").read_text() == "good" * 10
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    with pytest.raises(Exception, match="state.json"):
        m.save(3, lambda d: (d / "w").write_text("no state"))
    assert [s for s, _ in m.list()] == [1]


def test_a_killed_writer_never_corrupts_the_last_checkpoint(tmp_path):
    """A process killed mid-write (SIGKILL) leaves a stray temp dir, never a broken step-N."""
    script = textwrap.dedent(f"""
        import os, signal
        from codea1.train.checkpoint import CheckpointManager, write_json
        m = CheckpointManager({str(tmp_path)!r}, keep=3)
        m.save(1, lambda d: write_json(d / "state.json", {{"step": 1}}))
        def write(d):
            (d / "big").write_bytes(b"0" * 1000)
            os.kill(os.getpid(), signal.SIGKILL)
        m.save(2, write)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    m = CheckpointManager(tmp_path, keep=3)
    assert [s for s, _ in m.list()] == [1]
    assert list((tmp_path / "checkpoints").glob(".tmp-step-2-*"))  # the stray one
    m.save(2, _writer(2))                                        # the next save cleans up
    assert [s for s, _ in m.list()] == [1, 2]
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_resaving_a_step_replaces_it(tmp_path):
    m = CheckpointManager(tmp_path, keep=3)
    m.save(5, _writer(5, "old"))
    m.save(5, _writer(5, "new"))
    assert (m.latest() / "weights.bin").read_text() == "new" * 10
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-5"]


def test_a_crash_while_a_step_is_saved_again_keeps_one_whole_checkpoint_of_it(tmp_path, monkeypatch):
    """Saving step 5 again moves the old step-5 out of the way, then renames the new one
    into place. A crash between the two renames once lost step 5 (the old one already
    trash, the new one a temporary directory, both deleted at the next start): with keep=1
    the run had no checkpoint left. Now the old one, set aside, is step 5's checkpoint
    until the new one takes the name."""
    import codea1.train.checkpoint as ckpt

    m = CheckpointManager(tmp_path, keep=1)
    m.save(5, _writer(5, "old"))
    real_replace, calls = os.replace, []

    def crashing_replace(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # the second rename of the save: the process dies here
            raise KeyboardInterrupt("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(ckpt.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        m.save(5, _writer(5, "new"))
    monkeypatch.setattr(ckpt.os, "replace", real_replace)
    after = CheckpointManager(tmp_path, keep=1)  # the next start
    after.clean()
    assert [s for s, _ in after.list()] == [5]
    assert (after.latest() / "weights.bin").read_text() == "old" * 10
    after.save(5, _writer(5, "newer"))  # saving it again from there, then going on
    assert (after.latest() / "weights.bin").read_text() == "newer" * 10
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-5"]
    after.save(6, _writer(6))
    assert [s for s, _ in after.list()] == [6]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-6"]


def test_rng_capture_and_restore_replays_every_stream():
    state = capture_rng()

    def draw():
        return (random.random(), float(np.random.rand()), float(torch.rand(1)))

    first = draw()
    draw()
    restore_rng(state)
    assert draw() == first


def test_a_config_written_before_a_key_existed_resumes_as_its_default():
    """A run's config.yaml or checkpoint from before a newer codea1 added a key (here
    `rollout.code.stop`) lacks the key; it stands for the default that loading fills in, so
    the run resumes, while a value other than the default is still a change."""
    from codea1.train.config import resume_changes

    now = load_config(preset="cpu-demo").model_dump(mode="json")
    older = load_config(preset="cpu-demo").model_dump(mode="json")
    for section in ("code", "test"):
        del older["rollout"][section]["stop"]
    del older["validation"]["sampling"]["stop"]
    assert resume_changes(older, now, "config.yaml") == []
    assert resume_changes(now, older, "config.yaml") == []
    now["rollout"]["code"]["stop"] = ["\n```\n"]
    with pytest.raises(ConfigError, match=r"'rollout.code.stop' is \['\\n```\\n'\] but the run was trained with \[\]"):
        resume_changes(older, now, "config.yaml")


def test_data_check_off_as_yaml_reads_it(tmp_path):
    """YAML reads a bare `off` as false: `data.check=off` (the documented value) and
    `check: off` in a file mean "off". Before: "Input should be 'refuse', 'skip' or 'off'"."""
    assert load_config(preset="cpu-demo", overrides=["data.check=off"]).data.check == "off"
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  check: off\n")
    assert load_config(path=f).data.check == "off"
    with pytest.raises(ConfigError, match="'data.check'.*'refuse', 'skip' or 'off'"):
        load_config(preset="cpu-demo", overrides=["data.check=on"])


def test_a_negative_seed_is_a_config_error():
    """Before: numpy's "expected non-negative integer" traceback once the run dir was made."""
    with pytest.raises(ConfigError, match="'seed': Input should be greater than or equal to 0"):
        load_config(preset="cpu-demo", overrides=["seed=-1"])


def test_bare_bundled_stdin_trains_on_its_train_split():
    """`data.train=bundled-stdin` means its train split (20 problems), as bare `bundled`
    does, and `data.heldout=bundled-stdin` its held-out split (5). Before: all 25, the
    held-out ones among them."""
    from codea1.train.training_data import load_training_data

    cfg = load_config(preset="cpu-demo-stdin", overrides=["data.train=bundled-stdin", "data.heldout=bundled-stdin"])
    train, heldout = load_training_data(cfg)
    assert len(train) == 20 and {p.meta["split"] for p in train} == {"train"}
    assert len(heldout) == 5 and {p.meta["split"] for p in heldout} == {"heldout"}
