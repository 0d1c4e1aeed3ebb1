"""`codea1 export` on the real offline Qwen2.5-Coder-0.5B (a GGUF base): one training step,
then the test role merged (compared with codea1's own policy) and the code role as a
llama.cpp LoRA (compared with the checkpoint's adapter).

Slow (minutes on 2 shared cores: dequantising the GGUF in float32, one step, a 2 GB
export). Run it alone on the model: `flock /work/locks/model.lock pytest -m slow
tests/test_export_slow.py`.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")

from codea1.models import ModelError, offline_part_paths  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    try:
        offline_part_paths()
    except ModelError as exc:
        pytest.skip(f"offline model parts not installed: {exc}")
    import os

    from codea1.train.config import load_config
    from codea1.train.loop import train

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run_dir = tmp_path_factory.mktemp("slow") / "run"
    cfg = load_config(preset="cpu-demo", overrides=[
        "steps=1", "model.dtype=float32", "model.lora_r=8", "data.problems_per_step=1", "rollout.n_code=2",
        "rollout.n_test=2", "rollout.code.max_new_tokens=48", "rollout.test.max_new_tokens=48",
        "rollout.engine=hf", "validation.every=0", "checkpoint.every=1", "logging.progress=none",
        "logging.tensorboard=false", "judge.workers=1", "threads=2", "grpo.lr=1e-3", "grpo.warmup_steps=0",
        # 48 tokens rarely close a code fence: under the reference's extraction every candidate
        # would be invalid, every suite would score 0 and the test adapter would not move
        "judge.lenient_code_fences=true"])
    train(cfg, run_dir)
    return run_dir


@pytest.mark.timeout(3600)
def test_merged_test_model_computes_what_the_policy_computes(run, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from codea1.eval.loading import load_eval_policies
    from codea1.export import export_run

    adapter = load_file(str(run / "checkpoints" / "step-1" / "policies" / "test.safetensors"))
    moved = max(t.abs().max().item() for name, t in adapter.items() if "lora_B" in name)
    assert moved > 0, "the step did not update the test adapter: nothing to compare"
    result = export_run(run, tmp_path / "merged", "test")
    assert result.dtype == "float32"          # a GGUF base: its dequantised weights, in float32
    config = json.loads((tmp_path / "merged" / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and "quantization_config" not in config
    policies, _ = load_eval_policies(str(run), device="cpu", dtype="float32")
    ids = policies.tokenizer(["def add(a, b):\n    return a + b\n\nassert add(1, 2) == 3"],
                             return_tensors="pt")["input_ids"]
    with torch.no_grad():
        with policies.role("test") as model:
            expected = model(input_ids=ids).logits
        with policies.reference() as base:
            base_logits = base(input_ids=ids).logits
        exported = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)
        got = exported(input_ids=ids).logits
    gap = (got - expected).abs().max().item()
    assert gap < 1e-3, gap
    assert (expected - base_logits).abs().max().item() > 10 * gap   # the adapter's change, not noise


@pytest.mark.timeout(3600)
def test_code_adapter_for_llama_cpp(run, tmp_path):
    import gguf
    import numpy as np
    from safetensors.torch import load_file

    from codea1.export import export_run

    export_run(run, tmp_path / "gguf", "code", fmt="gguf-lora")
    reader = gguf.GGUFReader(str(tmp_path / "gguf" / "code-lora.gguf"))
    assert reader.get_field(gguf.Keys.General.TYPE).contents() == "adapter"
    assert reader.get_field(gguf.Keys.Adapter.LORA_ALPHA).contents() == pytest.approx(32.0 / 8 * 8)
    written = {t.name: t for t in reader.tensors}
    saved = load_file(str(run / "checkpoints" / "step-1" / "policies" / "code.safetensors"))
    assert len(written) == len(saved)
    a = saved["base_model.model.model.layers.3.self_attn.v_proj.lora_A.code.weight"]
    np.testing.assert_array_equal(np.asarray(written["blk.3.attn_v.weight.lora_a"].data).reshape(a.shape), a.numpy())
    assert "llama-cli -m" in (tmp_path / "gguf" / "README.md").read_text()
