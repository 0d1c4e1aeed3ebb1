"""LoRA layers of the update run as one matmul: the adapter merged into a copy of the weight.

Why: peft computes an adapted layer as `base(x) + scale * B(A(x))`. On a CPU the rank-r
product `B(A(x))` is memory-bound (its [tokens, d_out] output is written, then scaled,
then added to the base's: three full passes over memory for r = 16 multiply-adds a value),
and the float32 adapter weights are cast to the compute dtype at every call. On the
cpu-demo's update that costs more than the base matmuls themselves (benchmarks/train_step.py
--update-only). Between two optimiser steps the adapters do not move, so `merged_lora`
runs every adapted layer as

    y = x @ (W + scale * B @ A)^T + b

with the merged weight built once per adapter version (peft's `get_delta_weight`, summed
in float32 and rounded once to the base's dtype, as the sampler's `LeanModel` does) and
shared by every micro-batch until the optimiser changes the adapter. `_MergedLoRA`'s
backward gives the input's gradient through the same merged weight and the adapter's
gradients exactly as peft's chain rule does:

    u = x A^T,  v = dy B,  dB = scale * dy^T u,  dA = scale * v^T x   (x: [N, d_in], dy: [N, d_out])

The function is the same as peft's up to rounding order: in float32 the two agree to
float32 rounding; in bf16 the merged weight is rounded once where peft rounds the base
product and the adapter product separately (tests/test_merged_lora.py bounds both). The
sampler computes with the same merged rounding, so the update's log-probs are closer to
the sampler's, not further. CPU only, one plain LoRA adapter active, frozen base weight
and bias; any other layer keeps peft's forward (`_why_not` names the reason).
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch
import torch.nn.functional as F


class _MergedLoRA(torch.autograd.Function):
    """y = x @ merged^T + bias, with gradients for x and the adapter's A and B only."""

    @staticmethod
    def forward(ctx, x, merged, bias, lora_a, lora_b, scale):
        ctx.save_for_backward(x, merged, lora_a, lora_b)
        ctx.scale = scale
        return F.linear(x, merged, bias)

    @staticmethod
    def backward(ctx, dy):
        x, merged, lora_a, lora_b = ctx.saved_tensors
        dtype = merged.dtype
        dy2 = dy.reshape(-1, dy.shape[-1]).to(dtype)
        x2 = x.reshape(-1, x.shape[-1]).to(dtype)
        dx = (dy2 @ merged).view(x.shape).to(x.dtype) if ctx.needs_input_grad[0] else None
        u = x2 @ lora_a.to(dtype).t()                    # [N, r]
        v = dy2 @ lora_b.to(dtype)                       # [N, r]
        d_b = (dy2.t() @ u).float().mul_(ctx.scale)      # [d_out, r]
        d_a = (v.t() @ x2).float().mul_(ctx.scale)       # [r, d_in]
        return dx, None, None, d_a.to(lora_a.dtype), d_b.to(lora_b.dtype), None


def _is_lora_linear(module) -> bool:
    return hasattr(module, "lora_A") and hasattr(module, "get_delta_weight") and hasattr(module, "base_layer")


def _why_not(module) -> str | None:
    """Why this adapted layer keeps peft's forward now; None when it can run merged."""
    if module.disable_adapters:
        return "adapters disabled"
    if module.merged:
        return "adapter already merged into the base"
    active = [name for name in module.active_adapters if name in module.lora_A]
    if len(active) != 1:
        return f"{len(active)} active adapters (one merges)"
    name = active[0]
    if name in getattr(module, "lora_variant", {}) or getattr(module, "use_dora", {}).get(name):
        return "a LoRA variant (plain LoRA only)"
    if module.training and not isinstance(module.lora_dropout[name], torch.nn.Identity):
        return "LoRA dropout in training mode"
    base = module.get_base_layer()
    if not isinstance(base, torch.nn.Linear):
        return f"base layer {type(base).__name__} (nn.Linear only)"
    if base.weight.requires_grad or (base.bias is not None and base.bias.requires_grad):
        return "trainable base weight"
    if base.weight.device.type != "cpu" or hasattr(base.weight, "full_tensor"):
        return "not a plain CPU tensor"
    return None


class MergedLoRA:
    """Swaps each adapted layer's forward for the merged one while the block runs.

    The merged weights are cached per layer and keyed on the adapter's and the base's
    tensor versions, so an optimiser step (which updates A and B in place) rebuilds them
    at the next forward, and leaving the block frees them.
    """

    def __init__(self, model):
        self.layers = [m for m in model.modules() if _is_lora_linear(m)]
        self.cache: dict[int, tuple[tuple, torch.Tensor]] = {}
        self.builds = 0

    def merged_weight(self, module, name: str) -> torch.Tensor:
        base = module.get_base_layer()
        lora_a, lora_b = module.lora_A[name].weight, module.lora_B[name].weight
        key = (name, lora_a.data_ptr(), lora_a._version, lora_b.data_ptr(), lora_b._version,
               base.weight.data_ptr(), base.weight._version, base.weight.dtype)
        hit = self.cache.get(id(module))
        if hit is not None and hit[0] == key:
            return hit[1]
        with torch.no_grad(), torch.autocast(device_type="cpu", enabled=False):
            weight = (base.weight.float() + module.get_delta_weight(name).float()).to(base.weight.dtype)
        self.cache[id(module)] = (key, weight)
        self.builds += 1
        return weight

    def forward(self, module, original, x, *args, **kwargs):
        if args or kwargs or _why_not(module) is not None:
            return original(x, *args, **kwargs)
        [name] = [n for n in module.active_adapters if n in module.lora_A]
        base = module.get_base_layer()
        merged = self.merged_weight(module, name)
        bias = base.bias
        x = x.to(merged.dtype)
        return _MergedLoRA.apply(x, merged, bias, module.lora_A[name].weight, module.lora_B[name].weight,
                                 float(module.scaling[name]))

    @contextlib.contextmanager
    def swapped(self) -> Iterator["MergedLoRA"]:
        saved = []
        for module in self.layers:
            had = "forward" in module.__dict__
            original = module.forward
            saved.append((module, had, module.__dict__.get("forward")))
            module.forward = types.MethodType(
                lambda mod, x, *a, _orig=original, **kw: self.forward(mod, _orig, x, *a, **kw), module)
        try:
            yield self
        finally:
            for module, had, previous in saved:
                if had:
                    module.forward = previous
                else:
                    del module.forward
            self.cache.clear()


def merged_lora(model, enabled: bool = True):
    """Context: the model's LoRA layers run merged (`MergedLoRA`) while it is open.

    A no-op where `enabled` is False or the model has no adapted layer; layers that cannot
    run merged (`_why_not`) keep peft's forward.
    """
    if not enabled:
        return contextlib.nullcontext()
    merger = MergedLoRA(model)
    if not merger.layers:
        return contextlib.nullcontext()
    return merger.swapped()
