"""Rollout engines on CPU: the hf wrapper, and the vLLM engine against a stand-in `vllm`.

vLLM cannot run here (no GPU); `fake_vllm` has vLLM 0.30.0's call signatures and the
behaviours a weight-sync mistake would hide behind (no reload without load_inplace,
prefix caches keyed by LoRA name, weights freed by sleep level 2). Each check compares
the engine's per-token log-probs with the trainer's recomputation, which is what
`rollout/logp_mismatch` does in a run: a routing or sync mistake shows up as a gap.
"""

from __future__ import annotations

import math

import fake_vllm
import pytest
import torch

from codea1.engines import EngineUnavailable, VLLMConfig, make_engine, resolve_engine
from codea1.engines.adapters import export_adapter
from codea1.engines.correction import logp_mismatch, tis_weights
from codea1.engines.hf_engine import HFEngine
from codea1.grpo import GRPOConfig, Trajectory, grpo_token_loss, update_policy
from codea1.logprobs import trajectory_logprobs
from codea1.engines.hf_engine import generate
from codea1.rollout import GenerationStats, SamplingConfig, encode_prompts

torch.set_num_threads(1)
SAMPLING = SamplingConfig(max_new_tokens=5, temperature=1.0)
TEXTS = ["def f(x):\n", "assert f(2) == 3\n", "Write a function.\n"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tiny_model import tiny_test_model

    return tiny_test_model(tmp_path_factory.mktemp("engines") / "model")


@pytest.fixture
def fake(monkeypatch):
    return fake_vllm.install(monkeypatch)


def _policies(tiny_dir, mode, **kw):
    from codea1.models import load_policies

    return load_policies(name=str(tiny_dir), mode=mode, dtype="float32", device="cpu", lora_r=4, **kw)


def _perturb(policies, role, seed, scale):
    """Stand-in for an optimiser step: move `role`'s trainable weights."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policies.trainable_parameters(role):
            p.add_(torch.randn(p.shape, generator=g) * scale)


def _prompts(policies):
    return encode_prompts(policies.tokenizer, TEXTS)


def _gap(policies, role, groups) -> float:
    """Mean |trainer - engine| log-prob of the samples, trainer = `role`'s current weights."""
    seqs = [Trajectory(s.prompt_ids, s.completion_ids, 0.0, s.logprobs) for g in groups for s in g]
    with policies.role(role) as model:
        old = trajectory_logprobs(model, seqs, 4096)
    return logp_mismatch(old, [t.rollout_logprobs for t in seqs]).mean_abs


def _vllm(policies, tmp_path, **cfg):
    from codea1.engines.vllm_engine import VLLMEngine

    return VLLMEngine(policies, VLLMConfig(adapter_dir=str(tmp_path), **cfg))


# --- which engine ------------------------------------------------------------------------------


def test_engine_choice_and_clear_errors(monkeypatch, fake):
    assert resolve_engine("auto", "cpu") == "hf"
    assert resolve_engine("auto", "cuda") == "vllm"          # installed (the fake) and CUDA
    assert resolve_engine("hf", "cuda") == "hf"
    with pytest.raises(EngineUnavailable, match="needs a CUDA GPU") as err:
        resolve_engine("vllm", "cpu")
    assert "\n" not in str(err.value)
    monkeypatch.delitem(__import__("sys").modules, "vllm")
    monkeypatch.setattr("codea1.engines.base.vllm_installed", lambda: False)
    assert resolve_engine("auto", "cuda") == "hf"
    with pytest.raises(EngineUnavailable, match=r"not installed.*codea1\[vllm\]") as err:
        resolve_engine("vllm", "cuda")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="rollout.engine 'vlm'"):
        resolve_engine("vlm", "cpu")


def test_importing_a_missing_vllm_is_one_clear_line(monkeypatch):
    from codea1.engines.vllm_engine import import_vllm

    monkeypatch.setitem(__import__("sys").modules, "vllm", None)   # import vllm -> ImportError
    with pytest.raises(EngineUnavailable, match=r"codea1\[vllm\].*rollout.engine=hf"):
        import_vllm()


def test_hf_engine_is_todays_sampler(tiny_dir):
    pol = _policies(tiny_dir, "lora-shared")
    engine = make_engine("auto", pol)
    assert isinstance(engine, HFEngine) and not engine.reports_logprobs
    ids = _prompts(pol)
    a = engine.generate("code", ids, n=2, sampling=SAMPLING, generator=torch.Generator().manual_seed(3))
    b = generate(pol, "code", TEXTS, n=2, sampling=SAMPLING, generator=torch.Generator().manual_seed(3))
    assert [[s.completion_ids for s in g] for g in a] == [[s.completion_ids for s in g] for g in b]
    assert all(s.logprobs is None for g in a for s in g)


def test_an_engine_must_say_what_a_weight_change_takes():
    """`weights_changed` is part of the contract, not a silent default: an engine that left
    it out would sample with stale weights after every update, so it cannot be built.
    Fault tried: the old empty default back in `RolloutEngine` (the engine builds)."""
    from codea1.engines.interface import RolloutEngine

    class Forgetful(RolloutEngine):
        def generate(self, role, prompt_ids, n=1, sampling=None, **kwargs):
            return [[] for _ in prompt_ids]

    with pytest.raises(TypeError, match="weights_changed"):
        Forgetful()


# --- lora-shared: one engine, one adapter per role ---------------------------------------------


def test_lora_shared_one_engine_routes_each_role_to_its_adapter(fake, tiny_dir, tmp_path):
    pol = _policies(tiny_dir, "lora-shared")
    _perturb(pol, "code", 1, 0.5)
    _perturb(pol, "test", 2, 0.5)
    engine = _vllm(pol, tmp_path)
    llm = engine.llm
    args = llm.init_args
    assert (args["enable_lora"], args["max_loras"], args["max_lora_rank"]) == (True, 2, 8)  # r=4 -> 8
    assert args["enable_sleep_mode"] and args["logprobs_mode"] == "raw_logprobs"
    assert not args["skip_tokenizer_init"] and args["dtype"] == "float32" and args["model"] == str(tiny_dir)
    ids = _prompts(pol)
    gen = torch.Generator().manual_seed(0)
    code = engine.generate("code", ids, n=3, sampling=SAMPLING, generator=gen)
    test = engine.generate("test", ids, n=3, sampling=SAMPLING, generator=gen)
    routed = [(c["lora"].lora_name, c["lora"].lora_int_id, c["lora"].load_inplace) for c in llm.calls]
    assert routed == [("code", 1, False)] * 3 + [("test", 2, False)] * 3
    assert all(c["params"].n == 3 and c["params"].logprobs == 0 for c in llm.calls)
    assert [len(g) for g in code] == [3, 3, 3]
    # each role's samples carry that role's log-probs; the other role's weights disagree
    assert _gap(pol, "code", code) < 1e-4 and _gap(pol, "test", test) < 1e-4
    assert _gap(pol, "test", code) > 1e-2 and _gap(pol, "code", test) > 1e-2
    # the same random stream gives the same samples (seeds drawn from the generator)
    again = _vllm(pol, tmp_path).generate("code", ids, n=3, sampling=SAMPLING,
                                          generator=torch.Generator().manual_seed(0))
    assert [[s.completion_ids for s in g] for g in again] == [[s.completion_ids for s in g] for g in code]


def test_lora_adapter_is_reloaded_in_place_after_an_update(fake, tiny_dir, tmp_path):
    pol = _policies(tiny_dir, "lora-shared")
    _perturb(pol, "code", 1, 0.5)
    engine = _vllm(pol, tmp_path)
    llm = engine.llm
    ids = _prompts(pol)
    engine.generate("code", ids, n=2, sampling=SAMPLING)
    loads = len(llm.lora_loads)
    resets = llm.prefix_resets

    engine.release_memory()                        # the trainer's update runs now
    assert llm.sleeps == [1] and llm.asleep
    _perturb(pol, "code", 7, 0.5)                  # the update changed the code adapter
    engine.weights_changed(["code"])
    fresh = engine.generate("code", ids, n=2, sampling=SAMPLING)
    assert llm.wakes == [None]
    new = [(r.lora_name, r.lora_int_id, r.load_inplace) for r in llm.lora_loads[loads:]]
    assert new == [("code", 1, True)]               # reloaded in place, from the RAM-backed path
    assert llm.prefix_resets == resets + 1
    assert _gap(pol, "code", fresh) < 1e-4
    saved = engine._adapter_path("code") / "adapter_model.safetensors"
    assert saved.is_file() and str(saved).startswith(str(tmp_path))


def test_a_missed_sync_shows_up_as_logp_mismatch(fake, tiny_dir, tmp_path, monkeypatch):
    pol = _policies(tiny_dir, "lora-shared")
    _perturb(pol, "code", 1, 0.5)
    engine = _vllm(pol, tmp_path, sleep_level=0)
    ids = _prompts(pol)
    engine.generate("code", ids, n=2, sampling=SAMPLING)
    _perturb(pol, "code", 8, 0.5)
    stale = engine.generate("code", ids, n=2, sampling=SAMPLING)   # nobody said the weights changed
    assert _gap(pol, "code", stale) > 1e-2
    # a sync without the prefix-cache reset: the cached prompt still answers with old weights
    monkeypatch.setattr(engine.llm, "reset_prefix_cache", lambda *a, **k: True)
    engine.weights_changed(["code"])
    cached = engine.generate("code", ids, n=2, sampling=SAMPLING)
    assert _gap(pol, "code", cached) > 1e-3
    assert engine.llm.sleeps == []                                   # sleep_level 0: never sleeps


def test_selfplay_lora_shares_one_adapter(fake, tiny_dir, tmp_path):
    pol = _policies(tiny_dir, "selfplay")
    _perturb(pol, "code", 4, 0.5)
    engine = _vllm(pol, tmp_path)
    ids = _prompts(pol)
    c = engine.generate("code", ids[:1], n=2, sampling=SAMPLING)
    t = engine.generate("test", ids[:1], n=2, sampling=SAMPLING)
    assert {call["lora"].lora_name for call in engine.llm.calls} == {"shared"}
    assert _gap(pol, "code", c) < 1e-4 and _gap(pol, "test", t) < 1e-4


def test_lora_modes_refuse_sleep_level_2(fake, tiny_dir, tmp_path):
    with pytest.raises(ValueError, match="sleep_level=2"):
        _vllm(_policies(tiny_dir, "lora-shared"), tmp_path, sleep_level=2)


# --- full: the active role's weights are pushed into the engine --------------------------------


def test_full_mode_pushes_the_active_roles_weights_and_sleeps_during_the_update(fake, tiny_dir, tmp_path):
    pol = _policies(tiny_dir, "full")
    _perturb(pol, "test", 5, 0.05)                 # the two roles now hold different weights
    engine = _vllm(pol, tmp_path)
    llm = engine.llm
    assert "enable_lora" not in llm.init_args and engine.sleep_level == 2
    ids = _prompts(pol)
    code = engine.generate("code", ids, n=2, sampling=SAMPLING)
    test = engine.generate("test", ids, n=2, sampling=SAMPLING)
    assert _gap(pol, "code", code) < 1e-4 and _gap(pol, "test", test) < 1e-4
    names = {n for n, _ in pol.module("code").named_parameters()}
    assert llm.weight_loads == [names, names]       # the whole model, once per role switch
    assert llm.prefix_resets == 2
    engine.generate("test", ids, n=1, sampling=SAMPLING)
    assert len(llm.weight_loads) == 2               # same role, unchanged: nothing pushed

    engine.release_memory()
    assert llm.sleeps == [2]                         # level 2: the engine's weights are gone
    _perturb(pol, "code", 6, 0.05)
    engine.weights_changed(["code", "test"])
    code2 = engine.generate("code", ids, n=2, sampling=SAMPLING)
    assert llm.wakes == [["weights"], ["kv_cache"]]  # weights first, loaded, then the KV cache
    assert all(math.isfinite(x) for g in code2 for s in g for x in s.logprobs)
    assert _gap(pol, "code", code2) < 1e-4


def test_full_mode_under_fsdp2_pushes_whole_weights_in_the_compute_dtype(fake, tiny_dir, tmp_path):
    """FSDP2 keeps float32 master weights as shards (DTensors): the engine samples in the
    compute dtype it is given and receives whole tensors, never one rank's slice."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    from codea1.engines.vllm_engine import VLLMEngine, whole_tensor

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        value = torch.randn(6, 4)
        shard = distribute_tensor(value, mesh, [Shard(0)])
        assert isinstance(shard, DTensor)
        whole = whole_tensor(torch.nn.Parameter(shard))
        assert type(whole) is torch.Tensor and torch.equal(whole, value), (type(whole), whole, value)
    finally:
        dist.destroy_process_group()
    pol = _policies(tiny_dir, "full")
    engine = VLLMEngine(pol, VLLMConfig(adapter_dir=str(tmp_path)), dtype=torch.bfloat16)
    assert engine.llm.init_args["dtype"] == "bfloat16"
    engine.generate("code", _prompts(pol), n=1, sampling=SAMPLING)
    assert engine.llm.weight_dtypes == [{torch.bfloat16}]


# --- conversion to Sample ----------------------------------------------------------------------


def test_vllm_outputs_become_samples_with_eos_kept_and_truncation_flagged(tiny_dir):
    from codea1.engines.vllm_engine import samples_from_outputs

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    body = tok("def f", add_special_tokens=False)["input_ids"]
    lp = lambda ids, vals: [{t: fake_vllm.Logprob(v)} for t, v in zip(ids, vals)]  # noqa: E731
    done = fake_vllm.CompletionOutput(1, "", body + [eos], None, lp(body + [eos], [-0.5] * len(body) + [-0.25]),
                                      finish_reason="stop", stop_reason=eos)
    cut = fake_vllm.CompletionOutput(0, "", body, None, lp(body, [-1.0] * len(body)), finish_reason="length")
    outputs = [fake_vllm.RequestOutput("0", None, [5, 6], None, [done, cut], True)]
    stats = GenerationStats()
    [[first, second]] = samples_from_outputs(outputs, [[5, 6]], [True], 2, tok, stats)
    assert first.completion_ids == body and first.truncated and not first.finished   # sorted by index
    assert second.completion_ids == body + [eos] and second.finished and not second.truncated
    assert second.text == "def f" and second.logprobs == [-0.5] * len(body) + [-0.25]
    assert first.prompt_truncated and first.prompt_ids == [5, 6]
    assert (stats.samples, stats.completion_tokens, stats.completions_truncated) == (2, 2 * len(body) + 1, 1)
    aborted = fake_vllm.CompletionOutput(0, "", body, None, lp(body, [0.0] * len(body)), finish_reason="abort")
    with pytest.raises(RuntimeError, match="finish_reason 'abort'"):
        samples_from_outputs([fake_vllm.RequestOutput("0", None, [5], None, [aborted], True)], [[5]], [False],
                             1, tok, GenerationStats())
    short = fake_vllm.CompletionOutput(0, "", body, None, lp(body[:1], [0.0]), finish_reason="length")
    with pytest.raises(RuntimeError, match="log-probs"):
        samples_from_outputs([fake_vllm.RequestOutput("0", None, [5], None, [short], True)], [[5]], [False],
                             1, tok, GenerationStats())


def test_prompts_are_cut_to_the_engines_context(fake, tiny_dir, tmp_path):
    from codea1.rollout import PromptTooLong

    pol = _policies(tiny_dir, "lora-shared")
    engine = _vllm(pol, tmp_path, max_model_len=64)
    stats = GenerationStats()
    long = list(range(10, 110))
    # by default a prompt over the engine's context is refused, never cut from the left
    with pytest.raises(PromptTooLong, match="prompt 0: 100 tokens, over the limit of 60"):
        engine.generate("code", [long], n=1, sampling=SamplingConfig(max_new_tokens=4), stats=stats)
    [[s]] = engine.generate("code", [long], n=1, sampling=SamplingConfig(max_new_tokens=4, cut_prompts_left=True),
                            stats=stats)
    assert s.prompt_truncated and s.prompt_ids == long[-60:]
    assert (stats.prompts_truncated, stats.prompt_tokens_dropped) == (1, 40)
    assert len(s.completion_ids) <= 4


# --- trust but verify: the mismatch metric and truncated importance sampling ------------------


def test_mismatch_and_tis_weights_on_hand_computed_values():
    trainer = [torch.tensor([-1.0, -2.0]), torch.tensor([-0.5]), torch.tensor([-3.0])]
    rollout = [[-1.5, -1.0], None, [-3.0]]
    found = logp_mismatch(trainer, rollout)
    assert (found.tokens, found.sequences) == (3, 2)
    assert found.mean_abs == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    w = tis_weights(trainer, rollout, cap=1.5)
    assert w[0].tolist() == pytest.approx([1.5, math.exp(-1.0)])     # exp(0.5) = 1.65 capped at 1.5
    assert w[1].tolist() == [1.0] and w[2].tolist() == [1.0]
    with pytest.raises(ValueError, match="sequence 0: the engine gave 1 log-probs for 2"):
        logp_mismatch(trainer[:1], [[-1.0]])


def test_tis_weight_multiplies_the_policy_gradient_loss_only():
    cfg = GRPOConfig(kl_coef=0.5)
    logp = torch.tensor([-1.0, -2.0])
    adv = torch.tensor([1.0, -2.0])
    ref = torch.tensor([-1.0, -1.0])
    mask = torch.ones(2)
    base, _ = grpo_token_loss(logp, logp, ref, adv, mask, cfg)
    weighted, _ = grpo_token_loss(logp, logp, ref, adv, mask, cfg, is_weight=torch.tensor([1.5, 0.25]))
    # ratio 1: per-token surrogate is -A = [-1, 2]; weighted [-1.5, 0.5]; the KL term is unchanged
    kl = (math.exp(1.0) - 1.0 - 1.0) / 2 * 0.5
    assert float(base) == pytest.approx((-1 + 2) / 2 + kl)
    assert float(weighted) == pytest.approx((-1.5 + 0.5) / 2 + kl)


def test_zero_is_weights_leave_the_policy_unchanged(tiny_dir):
    pol = _policies(tiny_dir, "lora-shared")
    cfg = GRPOConfig(kl_coef=0.0, weight_decay=0.0, lr=1e-2, mini_batches=1)
    ids = _prompts(pol)
    seqs = [Trajectory(ids[0], [7, 8, 9], 1.0), Trajectory(ids[1], [10, 11], -1.0)]
    with pol.role("code") as model:
        old = trajectory_logprobs(model, seqs, 4096)
        before = [p.detach().clone() for p in pol.trainable_parameters("code")]
        opt = torch.optim.AdamW(pol.trainable_parameters("code"), lr=cfg.lr, weight_decay=0.0)
        update_policy(model, opt, seqs, cfg, old, None, [torch.zeros_like(o) for o in old])
        assert all(torch.equal(a, b) for a, b in zip(before, pol.trainable_parameters("code")))
        update_policy(model, opt, seqs, cfg, old, None, [torch.ones_like(o) for o in old])
        assert any(not torch.equal(a, b) for a, b in zip(before, pol.trainable_parameters("code")))


# --- adapter export ---------------------------------------------------------------------------


def test_exported_adapter_reloads_with_peft_to_identical_logits(tiny_dir, tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    pol = _policies(tiny_dir, "lora-shared")
    _perturb(pol, "code", 11, 0.5)
    out = export_adapter(pol.module("code"), "code", tmp_path / "code", torch.float32)
    x = torch.tensor([_prompts(pol)[0]])
    with torch.no_grad(), pol.role("code") as model:
        want = model(input_ids=x).logits
    base = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    with torch.no_grad():
        got = PeftModel.from_pretrained(base, out).eval()(input_ids=x).logits
    assert torch.equal(want, got)
    # in the engine's dtype: the same tensors, cast once
    half = load_file(str(export_adapter(pol.module("code"), "code", tmp_path / "bf16", torch.bfloat16)
                         / "adapter_model.safetensors"))
    full = load_file(str(out / "adapter_model.safetensors"))
    assert full and set(half) == set(full) and all(".code." not in k for k in half)
    assert all(half[k].dtype == torch.bfloat16 and torch.equal(half[k], full[k].to(torch.bfloat16)) for k in half)


# --- in a training run ------------------------------------------------------------------------


def test_a_training_step_on_the_vllm_engine_logs_the_mismatch(fake, tiny_dir, tmp_path, monkeypatch):
    from codea1.data import Problem, save_problems
    from codea1.train.config import load_config
    from codea1.train.loop import train
    from codea1.train.metrics import read_metrics

    problems = [Problem(id="T/add", question="def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n",
                        entry_point="add", reference="def add(a, b):\n    return a + b\n",
                        tests=["assert add(1, 2) == 3"], source="test", meta={})]
    save_problems(problems, tmp_path / "train.jsonl")
    monkeypatch.setattr("codea1.engines.base.resolve_engine", lambda name, device: "vllm")
    cfg = load_config(preset="cpu-demo", overrides=[
        f"model.name={tiny_dir}", "model.dtype=float32", "model.lora_r=4", "steps=2",
        f"data.train={tmp_path / 'train.jsonl'}", "data.heldout=null", "data.problems_per_step=1",
        "rollout.n_code=2", "rollout.n_test=2", "rollout.code.max_new_tokens=4",
        "rollout.test.max_new_tokens=4", "validation.every=0", "grpo.filter_zero_variance=false",
        "grpo.rollout_is=tis", "grpo.lr=1e-2", "grpo.warmup_steps=1", "judge.workers=1",
        f"rollout.vllm.adapter_dir={tmp_path}", "rollout.engine=vllm",
        "logging.progress=none", "logging.tensorboard=false", "threads=1"])
    train(cfg, tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:   # the engine sampled with the weights the trainer had: tiny float32 noise only
        assert r["update/code/sequences"] == 2
        assert 0.0 <= r["rollout/logp_mismatch"] < 1e-4
        assert r["update/code/is_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    assert not list(tmp_path.glob("codea1-adapters-*"))   # the engine's adapter files are removed


def test_asking_for_vllm_without_it_fails_with_one_line(tiny_dir, tmp_path, monkeypatch):
    from codea1.train.config import load_config
    from codea1.train.loop import Trainer

    monkeypatch.setattr("codea1.engines.base.vllm_installed", lambda: False)
    cfg = load_config(preset="cpu-demo", overrides=["rollout.engine=vllm", f"model.name={tiny_dir}",
                                                   "model.dtype=float32", "judge.workers=1"])
    pol = _policies(tiny_dir, "lora-shared")
    with pytest.raises(EngineUnavailable, match=r"^rollout.engine=vllm: vLLM is not installed[^\n]*$"):
        Trainer(cfg, tmp_path / "run", policies=pol)


def test_generation_benchmark_runs_both_engines(fake, monkeypatch, capsys):
    """`benchmarks/generation.py --engine vllm` end to end on the tiny model and the stand-in."""
    import importlib.util
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "generation.py"
    spec = importlib.util.spec_from_file_location("generation_bench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr("codea1.engines.resolve_engine", lambda name, device: name)
    monkeypatch.setattr("codea1.engines.base.resolve_engine", lambda name, device: name)
    monkeypatch.setattr(sys, "argv", ["generation.py", "--engine", "vllm", "--model", "tests-tiny",
                                      "--problems", "1", "--n", "2", "--n-test", "1", "--max-new-tokens", "3",
                                      "--dtype", "float32"])
    bench.main()
    out = capsys.readouterr().out
    assert "rows: 1 code prompts x 2 + 2 test prompts x 1" in out
    assert "rollout/logp_mismatch) on 2 code samples: 0.0000" in out
    import re

    for name in ("vllm", "hf"):   # one row of figures per engine
        assert len(re.findall(rf"^{name} +\d+ +\d+ +\d+ +\d+$", out, re.M)) == 1, out
    assert "vllm / hf:" in out


def test_under_torchrun_each_rank_runs_an_external_launcher_engine_seeded_per_prompt(fake, tiny_dir, tmp_path,
                                                                                     monkeypatch):
    """WORLD_SIZE > 1: vLLM's external_launcher executor (one engine per rank); the loop's
    per-prompt seeds reach the requests, so a prompt samples alike whatever it is batched with."""
    pol = _policies(tiny_dir, "lora-shared")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    engine = _vllm(pol, tmp_path)
    assert engine.llm.init_args["distributed_executor_backend"] == "external_launcher"
    ids = _prompts(pol)
    both = engine.generate("code", ids, n=2, sampling=SAMPLING, seeds=[11, 22, 33])
    assert [c["params"].seed for c in engine.llm.calls] == [11, 22, 33]
    alone = engine.generate("code", ids[1:2], n=2, sampling=SAMPLING, seeds=[22])
    assert [s.completion_ids for s in alone[0]] == [s.completion_ids for s in both[1]]
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert "distributed_executor_backend" not in _vllm(pol, tmp_path).llm.init_args


# --- a first GPU run: what vLLM 0.30.0 refuses, refused (or avoided) before anything loads -----


GIB = 2**30


def test_the_stand_in_checks_sampling_params_as_vllm_does(fake):
    for bad, message in [(dict(temperature=2.5), r"temperature must be in \[0, 2\]"),
                         (dict(temperature=-0.1), "non-negative"),
                         (dict(n=0), "n must be at least 1"),
                         (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
                         (dict(max_tokens=0), "max_tokens must be at least 1"),
                         (dict(temperature=0.0, n=2), "n must be 1 when using greedy sampling")]:
        with pytest.raises(ValueError, match=message):
            fake.SamplingParams(**bad)
    assert fake.SamplingParams(temperature=1e-6, n=3).temperature == 0.01   # raised first: random, not greedy
    greedy = fake.SamplingParams(temperature=0.0, top_p=0.5)
    assert (greedy.n, greedy.top_p) == (1, 1.0)


def test_a_greedy_request_for_n_samples_is_one_completion_copied(fake, tiny_dir, tmp_path):
    """Temperature 0 with n > 1 (a greedy validation, a library caller): vLLM refuses n > 1
    when greedy, so the engine asks for one and returns n copies, as the hf engine samples."""
    pol = _policies(tiny_dir, "lora-shared")
    _perturb(pol, "code", 1, 0.5)
    engine = _vllm(pol, tmp_path)
    greedy = SamplingConfig(max_new_tokens=5, temperature=0.0)
    groups = engine.generate("code", _prompts(pol), n=3, sampling=greedy, seeds=[1, 2, 3])
    assert [c["params"].n for c in engine.llm.calls] == [1, 1, 1]
    assert [len(g) for g in groups] == [3, 3, 3]
    for g in groups:
        assert len({tuple(s.completion_ids) for s in g}) == 1
    assert _gap(pol, "code", groups) < 1e-4
    hf = make_engine("hf", pol).generate("code", _prompts(pol), n=3, sampling=greedy, seeds=[1, 2, 3])
    assert [[s.completion_ids for s in g] for g in hf] == [[s.completion_ids for s in g] for g in groups]


def test_temperatures_vllm_refuses_are_refused_where_they_are_set():
    from pydantic import ValidationError

    from codea1.eval.code import CodeEvalConfig
    from codea1.eval.tests_eval import TestEvalConfig
    from codea1.train.config import ConfigError, load_config

    with pytest.raises(ValidationError, match="less than or equal to 2"):
        SamplingConfig(temperature=2.5)
    with pytest.raises(ConfigError, match=r"config key 'rollout.code.temperature': .*less than or equal to 2"):
        load_config(preset="cpu-demo", overrides=["rollout.code.temperature=3"])
    with pytest.raises(ConfigError, match=r"^--set: rollout.test.temperature=0 is greedy decoding: the "
                                          r"rollout.n_test=8 samples[^\n]*$"):
        load_config(overrides=["rollout.test.temperature=0"])
    with pytest.raises(ConfigError, match=r"validation.sampling.temperature=0 is greedy decoding: the "
                                          r"validation.n_code=32 samples"):
        load_config(overrides=["validation.sampling.temperature=0"])
    assert load_config(preset="cpu-demo").validation.sampling.temperature == 0.0   # n_code 1: one greedy sample
    assert load_config(overrides=["mode=golden", "rollout.test.temperature=0", "rollout.n_test=1"]).mode == "golden"
    with pytest.raises(ValueError, match=r"^--temperature 0 is greedy decoding: the --n 4 samples would all be "
                                         r"the same; use --greedy"):
        CodeEvalConfig(temperature=0.0, n=4)
    assert CodeEvalConfig(temperature=0.0, n=1).n == 1 and CodeEvalConfig(greedy=True).temperature == 0.0
    for config in (CodeEvalConfig, TestEvalConfig):
        with pytest.raises(ValueError, match=r"--temperature must lie in \[0, 2\]"):
            config(temperature=2.5)


def test_groups_of_one_are_refused_at_config_time_naming_the_key():
    from codea1.train.config import ConfigError, load_config

    for key in ("rollout.n_code", "rollout.n_test"):
        with pytest.raises(ConfigError, match=rf"^preset cpu-demo \+ --set: {key}=1: a GRPO group of one sample "
                                              r"has no advantage and learns nothing; expected at least 2$"):
            load_config(preset="cpu-demo", overrides=[f"{key}=1"])
    # golden mode trains the code model alone: its test group size is not used
    assert load_config(overrides=["mode=golden", "rollout.n_test=1"]).rollout.n_test == 1


def test_vllm_lora_on_the_embedding_or_output_head_is_refused_before_loading(fake, tiny_dir, tmp_path, monkeypatch):
    from codea1.train.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"model.lora_target_modules=\['embed_tokens'\]: vLLM serves LoRA "
                                          r"adapters on linear layers only"):
        load_config(overrides=["rollout.engine=vllm", "model.lora_target_modules=[q_proj, embed_tokens]"])
    assert load_config(overrides=["rollout.engine=hf", "model.lora_target_modules=[q_proj, lm_head]"])
    pol = _policies(tiny_dir, "lora-shared", lora_target_modules=["q_proj", "embed_tokens"])
    with pytest.raises(ValueError, match="model.lora_target_modules"):
        _vllm(pol, tmp_path)
    assert not fake_vllm.GPU.held                                    # refused before vLLM started
    # and the stand-in refuses such an adapter as vLLM does, once it is loaded
    monkeypatch.setattr("codea1.engines.vllm_engine.check_vllm_lora_targets", lambda *a: None)
    engine = _vllm(pol, tmp_path)
    with pytest.raises(ValueError, match="expected target modules in the linear layers"):
        engine.generate("code", _prompts(pol)[:1], n=1, sampling=SAMPLING)


def _on_gpu(monkeypatch, fake, policies_gib: float):
    """The fake GPU (80 GiB) with the trainer's policies holding `policies_gib` of it."""
    fake_vllm.GPU.held["policies"] = int(policies_gib * GIB)
    monkeypatch.setattr("codea1.engines.vllm_engine.gpu_memory", lambda device: fake_vllm.GPU.mem_get_info())


def test_the_engine_sizes_its_share_from_the_memory_actually_free(fake, tiny_dir, tmp_path, monkeypatch):
    from codea1.engines.vllm_engine import GPU_HEADROOM_BYTES

    pol = _policies(tiny_dir, "lora-shared")
    _on_gpu(monkeypatch, fake, 60)                  # 20 GiB free: 0.3 of 80 GiB (24 GiB) would not start
    engine = _vllm(pol, tmp_path)
    share = engine.llm.init_args["gpu_memory_utilization"]
    assert share == math.floor((20 * GIB - GPU_HEADROOM_BYTES) / (80 * GIB) * 1000) / 1000 == 0.243
    assert fake_vllm.GPU.free >= GPU_HEADROOM_BYTES
    engine.close()
    _on_gpu(monkeypatch, fake, 10)                  # plenty free: the configured share as is
    assert _vllm(pol, tmp_path).llm.init_args["gpu_memory_utilization"] == 0.3
    # the stand-in refuses as vLLM does when the share is not sized
    with pytest.raises(ValueError, match=r"Free memory on device .* is less than desired GPU memory utilization"):
        fake.LLM(str(tiny_dir), gpu_memory_utilization=0.9)


def test_too_little_free_memory_for_the_weights_is_one_line_before_vllm_starts(fake, tiny_dir, tmp_path,
                                                                                 monkeypatch):
    pol = _policies(tiny_dir, "lora-shared")
    _on_gpu(monkeypatch, fake, 79.2)
    with pytest.raises(EngineUnavailable, match=r"^gpu_memory_utilization: the GPU has 0.8 of 80.0 GiB free, "
                                                r"and the vLLM engine needs at least 1.0 GiB[^\n]*hf engine$"):
        _vllm(pol, tmp_path)
    assert list(fake_vllm.GPU.held) == ["policies"]


def test_eval_on_a_gpu_holding_the_policies_starts_vllm(fake, tiny_dir, tmp_path, monkeypatch):
    """`codea1 eval ... --engine vllm` keeps the HF policies on the GPU: its 0.85 share of the
    GPU is lowered to what is free instead of vLLM refusing to start."""
    from codea1.eval.loading import EVAL_GPU_MEMORY, eval_engine

    monkeypatch.setattr("codea1.engines.base.resolve_engine", lambda name, device: "vllm")
    pol = _policies(tiny_dir, "lora-shared")
    _on_gpu(monkeypatch, fake, 16)                  # a 7B model's bf16 policies
    engine = eval_engine("vllm", pol)
    share = engine.llm.init_args["gpu_memory_utilization"]
    assert 0.79 < share < EVAL_GPU_MEMORY
    engine.close()


def test_closing_an_engine_gives_its_gpu_memory_back_for_a_second_engine(fake, tiny_dir, tmp_path, monkeypatch):
    pol = _policies(tiny_dir, "lora-shared")
    _on_gpu(monkeypatch, fake, 50)                  # 30 GiB free
    first = _vllm(pol, tmp_path)
    assert first.llm.init_args["gpu_memory_utilization"] == 0.3 and fake_vllm.GPU.free == 6 * GIB
    adapters = first._adapter_path("code").parent
    first.close()
    assert fake_vllm.GPU.free == 30 * GIB and not adapters.exists()
    assert fake_vllm._MODEL_PARALLEL == {"initialized": False, "destroyed": 1, "world_destroyed": 1}
    second = _vllm(pol, tmp_path)                   # the same share again: nothing of the first is left
    assert second.llm.init_args["gpu_memory_utilization"] == 0.3
    second.generate("code", _prompts(pol)[:1], n=1, sampling=SAMPLING)
    second.close()
    second.close()                                  # twice is harmless
    assert fake_vllm.GPU.free == 30 * GIB


def test_vllm_stop_strings_end_a_completion_as_the_hf_engine_does(fake, tiny_dir, tmp_path):
    """`sampling.stop` reaches vLLM as its `stop` (detokenizing only then, the completing
    token kept): each completion is the stop-free draw cut where its text first holds the
    string, finished; without strings nothing is detokenized."""
    pol = _policies(tiny_dir, "lora-shared")
    engine = _vllm(pol, tmp_path)
    ids = _prompts(pol)
    cfg = SamplingConfig(max_new_tokens=30, temperature=1.0)
    free = engine.generate("code", ids, n=2, sampling=cfg, seeds=[5, 6, 7])
    assert all(not c["params"].detokenize and not c["params"].stop for c in engine.llm.calls)
    text = free[0][0].text
    stop = text[len(text) // 2:len(text) // 2 + 2]
    assert stop.strip(), text
    engine.llm.calls.clear()
    stopped = engine.generate("code", ids, n=2, sampling=cfg.model_copy(update={"stop": [stop]}), seeds=[5, 6, 7])
    params = engine.llm.calls[0]["params"]
    assert params.detokenize and params.stop == [stop] and params.include_stop_str_in_output
    tok = pol.tokenizer
    for a, b in zip([s for g in free for s in g], [s for g in stopped for s in g]):
        at = next((i for i in range(1, len(a.completion_ids) + 1)
                   if stop in tok.decode(a.completion_ids[:i], skip_special_tokens=True)), None)
        if at is None:
            assert b.completion_ids == a.completion_ids
        else:
            assert b.completion_ids == a.completion_ids[:at] and b.finished and not b.truncated
            assert b.logprobs == a.logprobs[:at]
    assert stopped[0][0].finished
