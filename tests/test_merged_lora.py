"""codea1.merged_lora: the update's LoRA layers run merged compute what peft computes.

On a tiny random Qwen2 with every linear layer adapted and non-zero adapters: the merged
function's gradients (gradcheck in float64), a whole GRPO update's loss and adapter
gradients with the merge on and off (float32 to rounding; bf16 within its rounding), the
cache rebuilt after an optimiser step moves the adapter, peft's forward for the reference
(adapters disabled) and restored when the block ends.

Faults tried, each failing here: dA computed with B's scaling left out (gradcheck and the
update's gradients); the cache keyed on the layer only, not the adapter's version (the
after-a-step forward is off by ~1e-1); the forward not restored on exit (the
restored-forward check).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from codea1.grpo import GRPOConfig, Trajectory, update_policy  # noqa: E402
from codea1.merged_lora import MergedLoRA, _MergedLoRA, merged_lora  # noqa: E402


def _model(dtype=torch.float32):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=True)
    base = Qwen2ForCausalLM(cfg).to(dtype)
    for p in base.parameters():
        p.requires_grad_(False)
    peft = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape) * 0.2)
                p.data = p.data.float()  # adapters in float32 on any base, as codea1.models keeps them
    return peft.eval()


SEQS = [
    Trajectory([1, 2, 3, 4, 5, 6], [10, 11, 12, 13, 14], 1.0),
    Trajectory([7, 8, 9], [20, 21], -0.5),
    Trajectory([1, 2, 3, 4, 5, 6], [15, 16, 17], 0.25),
    Trajectory([30, 31, 32, 33], [34, 35, 36, 37, 38, 39], -0.75),
]


def _grads(model, cfg):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.0)  # lr 0: the adapters stay put, their gradients are kept
    opt.zero_grad = lambda set_to_none=True: None
    for p in params:
        p.grad = None
    old = [None] * len(SEQS)  # taken from the update's own forward (reuse_old_logprobs)
    ref = [torch.full((len(s.completion_ids),), -4.0) for s in SEQS]
    with merged_lora(model, cfg.merged_lora):
        stats = update_policy(model, opt, SEQS, cfg, old, ref)
    return [p.grad.clone() for p in params], stats


def test_merged_function_gradients_are_exact():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, 6, dtype=torch.float64)
    a = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(7, dtype=torch.float64)

    def merged(x, a, b):
        return _MergedLoRA.apply(x, w + 1.5 * b @ a, bias, a, b, 1.5)

    want = x @ w.T + bias + 1.5 * (x @ a.T) @ b.T
    assert torch.allclose(merged(x, a, b), want, atol=1e-12)
    assert torch.autograd.gradcheck(merged, (x, a, b))


@pytest.mark.parametrize("dtype,rel", [(torch.float32, 1e-4), (torch.bfloat16, 5e-2)])
def test_update_with_the_merge_equals_peft(dtype, rel):
    model = _model(dtype)
    common = dict(mini_batches=1, grad_clip=1e9, kl_coef=0.05, micro_batch_tokens=16, logprob_chunk_tokens=4)
    g_peft, st_peft = _grads(model, GRPOConfig(**common, merged_lora=False))
    g_merged, st_merged = _grads(model, GRPOConfig(**common, merged_lora=True))
    assert st_peft.kl > 0 and st_peft.grad_norm > 0
    for key in ("loss", "pg_loss", "kl", "grad_norm"):
        assert getattr(st_merged, key) == pytest.approx(getattr(st_peft, key), rel=rel, abs=1e-6), key
    for a, b in zip(g_peft, g_merged):
        assert (a - b).norm() <= rel * a.norm() + 1e-7


def test_an_optimiser_step_rebuilds_the_merged_weight():
    model = _model()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    merger = MergedLoRA(model)
    with merger.swapped(), torch.no_grad():
        model(ids)
        builds = merger.builds
        model(ids)
        assert merger.builds == builds  # unchanged adapters: the cache serves
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(0.3)  # in place, as an optimiser step does
        got = model(ids).logits
        assert merger.builds == 2 * builds
    with torch.no_grad():
        want = model(ids).logits  # peft's forward again
    assert torch.allclose(got, want, atol=1e-5)


def test_reference_runs_the_base_and_the_forward_is_restored():
    model = _model()
    ids = torch.tensor([[4, 5, 6, 7]])
    layers = MergedLoRA(model).layers
    assert layers and all("forward" not in m.__dict__ for m in layers)
    with torch.no_grad():
        base = copy.deepcopy(model).get_base_model()
        with model.disable_adapter():
            want_ref = model(ids).logits
        with merged_lora(model):
            assert all("forward" in m.__dict__ for m in layers)
            with model.disable_adapter():
                got_ref = model(ids).logits
            adapted = model(ids).logits
    assert all("forward" not in m.__dict__ for m in layers)
    assert torch.equal(got_ref, want_ref)
    assert not torch.allclose(adapted, want_ref, atol=1e-3)
    del base


def test_switched_off_is_peft_itself():
    model = _model()
    with merged_lora(model, enabled=False):
        assert all("forward" not in m.__dict__ for m in MergedLoRA(model).layers)
