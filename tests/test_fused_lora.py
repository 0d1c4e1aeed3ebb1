"""codea1.logprobs.fused_lora: the update's LoRA layers, fused, compute what peft computes.

On a tiny random Qwen2 with every linear layer adapted and non-zero adapters: the fused
function's gradients (gradcheck in float64), a whole GRPO update's loss and adapter
gradients with the fusion on and off (float32 to rounding, the forward's loss bit for bit
at a power-of-two scaling; bf16 within its rounding), peft's forward for the reference
(adapters disabled) and restored when the block ends.

Faults tried, each failing here: dB without the scaling (gradcheck, the update's
gradients); dx without the adapter's part `g A` (gradcheck, the update's gradients); the
forward not restored on exit (the restored-forward check).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from codea1.grpo import GRPOConfig, Trajectory, update_policy  # noqa: E402
from codea1.logprobs import _FusedLoRALinear, _lora_layers, fused_lora, fused_lora_unsupported  # noqa: E402


def _model(dtype=torch.float32, alpha=8):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=True)
    base = Qwen2ForCausalLM(cfg).to(dtype)
    for p in base.parameters():
        p.requires_grad_(False)
    peft = get_peft_model(base, LoraConfig(r=4, lora_alpha=alpha, target_modules="all-linear"))
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
    with fused_lora(model, cfg.fused_lora):
        stats = update_policy(model, opt, SEQS, cfg, old, ref)
    return [p.grad.clone() for p in params], stats


def test_fused_function_gradients_are_exact():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, 6, dtype=torch.float64)
    a = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(7, dtype=torch.float64)

    def fused(x, a, b):
        return _FusedLoRALinear.apply(x, w, bias, a, b, 1.5)

    want = x @ w.T + bias + 1.5 * (x @ a.T) @ b.T
    assert torch.allclose(fused(x, a, b), want, atol=1e-12)
    assert torch.autograd.gradcheck(fused, (x, a, b))


@pytest.mark.parametrize("dtype,alpha,rel", [(torch.float32, 8, 1e-5), (torch.float32, 6, 1e-5),
                                             (torch.bfloat16, 8, 5e-2)])
def test_update_with_the_fusion_equals_peft(dtype, alpha, rel):
    model = _model(dtype, alpha)
    assert all(fused_lora_unsupported(m) is None for m in _lora_layers(model))
    common = dict(mini_batches=1, grad_clip=1e9, kl_coef=0.05, micro_batch_tokens=16, logprob_chunk_tokens=4)
    g_peft, st_peft = _grads(model, GRPOConfig(**common, fused_lora=False))
    g_fused, st_fused = _grads(model, GRPOConfig(**common, fused_lora=True))
    assert st_peft.kl > 0 and st_peft.grad_norm > 0
    if dtype == torch.float32 and alpha == 8:  # a power-of-two scaling: the forward's very numbers
        for key in ("loss", "pg_loss", "kl"):
            assert getattr(st_fused, key) == getattr(st_peft, key), key
    for key in ("loss", "pg_loss", "kl", "grad_norm"):
        assert getattr(st_fused, key) == pytest.approx(getattr(st_peft, key), rel=rel, abs=1e-6), key
    for a, b in zip(g_peft, g_fused):
        assert (a - b).norm() <= rel * a.norm() + 1e-7


def test_the_fused_layers_run_and_the_forward_is_restored():
    model = _model()
    ids = torch.tensor([[4, 5, 6, 7]])
    layers = _lora_layers(model)
    assert layers and all("forward" not in m.__dict__ for m in layers)
    calls = []
    apply = _FusedLoRALinear.apply
    with torch.no_grad():
        with model.disable_adapter():
            want_ref = model(ids).logits
        want = model(ids).logits
        _FusedLoRALinear.apply = lambda *a: calls.append(1) or apply(*a)
        try:
            with fused_lora(model):
                assert all("forward" in m.__dict__ for m in layers)
                with model.disable_adapter():
                    got_ref = model(ids).logits   # the reference: peft's own forward, no fusion
                assert not calls
                got = model(ids).logits
        finally:
            _FusedLoRALinear.apply = apply
    assert len(calls) == len(layers)
    assert all("forward" not in m.__dict__ for m in layers)
    assert torch.equal(got_ref, want_ref)
    assert torch.allclose(got, want, atol=1e-6)
    assert not torch.allclose(got, want_ref, atol=1e-3)


def test_switched_off_is_peft_itself():
    model = _model()
    with fused_lora(model, enabled=False):
        assert all("forward" not in m.__dict__ for m in _lora_layers(model))
