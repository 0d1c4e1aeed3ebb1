"""The paper presets train on the paper's files, and validate as the reference does."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import codea1.engines.hf_engine as hf_engine

import codea1.rollout as rollout
from codea1.cli import app
from codea1.train.config import ConfigError, load_config, require_data
from codea1.train.loop import Trainer, load_training_data

PAPER = ("paper-1.5b", "paper-3b", "paper-7b")


@pytest.mark.parametrize("name", PAPER)
def test_paper_presets_need_the_paper_files(name):
    cfg = load_config(preset=name)
    assert (cfg.data.train, cfg.data.heldout) == ("required", "required")
    with pytest.raises(ConfigError) as info:
        require_data(cfg)
    message = str(info.value)
    assert "data.train is required" in message
    assert "kodcode_hard_dual_model_training_data_mix.parquet" in message
    assert "Code-A1/code/rl/train_data" in message and "KodCode/KodCode-V1" in message
    with pytest.raises(ConfigError, match=r"data.heldout is required: .*validation_data_mix.parquet"
                                          r".*Code-A1/code/rl/val_data"):
        require_data(load_config(preset=name, overrides=["data.train=kodcode.parquet"]))
    with pytest.raises(ConfigError, match="data.train is required"):
        load_training_data(cfg)   # the library path refuses too, before any model loads
    # the reference's validation: every 10 steps, all problems, 32 samples at 0.7 / 0.95
    v = cfg.validation
    assert (v.every, v.problems, v.n_code, v.sampling.temperature, v.sampling.top_p) == (10, None, 32, 0.7, 0.95)
    assert not v.test_model and cfg.grpo.clip_ratio_c == 10.0 and cfg.steps == 111
    assert v.at_start and v.at_end                 # also before the first and after the last step


@pytest.mark.parametrize("name", PAPER)
def test_paper_presets_use_the_reference_lengths_and_rules(name):
    """4,096 new tokens for both models, code prompts up to 4,096 (longer ones dropped from
    the data), test prompts up to 8,192, nothing ever cut from the left; drop_last epochs."""
    cfg = load_config(preset=name)
    code, test, val = cfg.rollout.code, cfg.rollout.test, cfg.validation.sampling
    assert (code.max_new_tokens, code.max_prompt_tokens) == (4096, 4096)
    assert (test.max_new_tokens, test.max_prompt_tokens) == (4096, 8192)
    assert (val.max_new_tokens, val.max_prompt_tokens) == (4096, 4096)
    assert not any(s.cut_prompts_left for s in (code, test, val))
    assert not cfg.rollout.project_code_prompt and not cfg.data.cross_epochs
    assert (cfg.grpo.kl_clamp, cfg.grpo.kl_log_ratio_clamp) == (10.0, 20.0)
    # a whole test sequence (prompt and answer) fits one micro-batch of the update
    assert cfg.grpo.micro_batch_tokens >= test.max_prompt_tokens + test.max_new_tokens


def test_train_command_names_the_missing_file_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--preset", "paper-1.5b", "--run-dir", str(run)])
    assert result.exit_code == 2
    assert "data.train is required" in result.output and "train_data" in result.output
    assert not run.exists()


def test_validation_reports_avg_and_pass_at_k_per_data_source(tmp_path, monkeypatch):
    """On a validation file of the reference's shape, with scripted samples (hand-counted)."""
    from paper_rows import ScriptedPolicies, scripted_generate, validation_file

    from codea1.data import load_problems
    from codea1.engines.hf_engine import HFEngine
    from codea1.sandbox import Executor
    from codea1.train.distributed import Ranks

    counts = {"running_max": 4, "vowel_runs": 1, "round_half_up": 3, "second_smallest": 2}
    monkeypatch.setattr(hf_engine, "generate", scripted_generate(counts))
    trainer = Trainer.__new__(Trainer)
    trainer.cfg = load_config(preset="paper-1.5b", overrides=[
        "data.train=x", "data.heldout=x", "validation.n_code=4", "validation.sampling.batch_size=8"])
    trainer.heldout = load_problems(validation_file(tmp_path / "validation_data_mix.parquet"))
    trainer.policies, trainer.step, trainer.judge = ScriptedPolicies(), 10, None
    trainer.ranks, trainer.sharded = Ranks(), False
    trainer.engine = HFEngine(trainer.policies)
    with Executor(workers=2) as trainer.executor:
        metrics = trainer.validate()
    # every row counts, as in the reference's validation (HumanEvalStyle/2's wrong reference
    # does not matter: the candidates are checked against the tests)
    assert metrics["val/problems"] == 4
    assert metrics["val/humanevalplus/problems"] == 3 and metrics["val/mbppplus/problems"] == 1
    assert metrics["val/humanevalplus/avg@4"] == pytest.approx((4 + 1 + 3) / 12)
    assert metrics["val/humanevalplus/pass@1"] == pytest.approx((4 + 1 + 3) / 12)
    assert metrics["val/humanevalplus/pass@4"] == pytest.approx(1.0)
    assert metrics["val/mbppplus/avg@4"] == pytest.approx(0.5)
    assert metrics["val/code_pass_rate"] == pytest.approx(10 / 16)
    assert "val/test_valid_ratio" not in metrics   # the reference validates the code model only


def test_validation_asks_with_each_rows_own_prompt(tmp_path, monkeypatch):
    """The code model reads the row's `prompt` column as is (the reference's validation does);
    `rollout.project_code_prompt` switches to codea1's wording."""
    from paper_rows import ScriptedPolicies, prompt_text, scripted_generate, validation_file

    from codea1.data import load_problems
    from codea1.engines.hf_engine import HFEngine
    from codea1.sandbox import Executor
    from codea1.train.distributed import Ranks

    seen: list[str] = []
    inner = scripted_generate({"running_max": 1, "vowel_runs": 1, "round_half_up": 1, "second_smallest": 1})

    def recording(policies, role, prompts, n=1, sampling=None, **kw):
        seen.extend(prompt_text(p, policies) for p in prompts)
        return inner(policies, role, prompts, n=n, sampling=sampling, **kw)

    monkeypatch.setattr(hf_engine, "generate", recording)
    heldout = load_problems(validation_file(tmp_path / "validation_data_mix.parquet"))
    tok = ScriptedPolicies.tokenizer
    for switch, expected in (("false", [p.meta["prompt"] for p in heldout]),
                             ("true", [rollout.code_messages(p, own_prompt=False) for p in heldout])):
        trainer = Trainer.__new__(Trainer)
        trainer.cfg = load_config(preset="paper-1.5b", overrides=[
            "data.train=x", "data.heldout=x", "validation.n_code=1", "validation.sampling.batch_size=8",
            f"rollout.project_code_prompt={switch}"])
        trainer.heldout, trainer.policies, trainer.step, trainer.judge = heldout, ScriptedPolicies(), 0, None
        trainer.ranks, trainer.sharded, trainer.engine = Ranks(), False, HFEngine(trainer.policies)
        seen.clear()
        with Executor(workers=2) as trainer.executor:
            assert trainer.validate()["val/problems"] == 4
        assert seen == [tok.apply_chat_template(m) for m in expected]
    assert expected != [p.meta["prompt"] for p in heldout]   # the two wordings differ
