"""Linear layers whose weights oneDNN lays out once, for the sampler.

Why: on a CPU, `F.linear` hands oneDNN a plain weight matrix that its AMX/AVX-512
kernels first reorder into their blocked layout, on every call. For a frozen weight that
is wasted work: measured on a 2-core AMX CPU (benchmarks/train_step.py), a reordered
896x4864 bf16 weight multiplies 1.4x faster at 8 to 700 rows. The numbers are the
kernel's own either way (each packed weight is checked once on a probe input; a torch
without oneDNN, or any difference, keeps the plain path).

`Linear` is `x @ W.T + b` with W packed (the sampler's merged weights). Tried and left
out: the same for the update's frozen base weights (forward with W packed, input gradient
with W.T packed) ran no faster at the update's 100-700-row micro-batches on that CPU
(18.8 s against 19.3 s a cpu-demo update, within the noise) and held 1.4 GiB more.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PACK_ROWS = 32  # the batch size oneDNN lays a weight out for (any batch then works)


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def pack(weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor | None:
    """`weight` [out, in] reordered for oneDNN, or None where that is not possible or
    would not give `F.linear`'s result."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16) or not onednn_available():
        return None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS)
        probe = torch.randn(3, weight.shape[1], generator=torch.Generator().manual_seed(0)).to(weight.dtype)
        got = torch.ops.mkldnn._linear_pointwise(probe, packed, bias, "none", [], "")
        want = F.linear(probe, weight.detach(), bias)
    except (RuntimeError, AttributeError):
        return None
    return packed if torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-2) else None


def packed_matmul(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`x @ W.T + bias` for a weight packed by `pack` (any leading dimensions of x)."""
    flat = x.reshape(-1, x.shape[-1])
    out = torch.ops.mkldnn._linear_pointwise(flat, packed, bias, "none", [], "")
    return out.view(*x.shape[:-1], out.shape[-1])


class Linear:
    """`x @ weight.T + bias`, the weight packed once where oneDNN can take it."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        self.bias = bias
        self.packed = pack(weight, bias)
        self.weight = weight if self.packed is None else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        return packed_matmul(x, self.packed, self.bias)
