"""Trust but verify: the rollout engine's log-probabilities against the trainer's.

An engine such as vLLM samples with its own copy of the weights (bf16, other kernels).
The update recomputes every token's log-probability with the training model
(`old_logp`); `logp_mismatch` is the mean |old_logp - engine logp| over the tokens (about
1e-3..1e-2 in bf16; a broken weight sync gives tenths or more at once).

`tis_weights` is truncated importance sampling (Yao et al. 2025, "Your efficient RL
framework secretly brings you off-policy RL training"; verl's `tis_imp_ratio_cap`, TRL's
`vllm_importance_sampling_cap`): each token's policy-gradient loss is multiplied by
min(exp(old_logp - engine_logp), cap), correcting for the samples having come from the
engine's distribution rather than the trainer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass
class Mismatch:
    """Mean |trainer - engine| log-prob over `tokens` tokens of `sequences` sequences."""

    mean_abs: float
    tokens: int
    sequences: int


def _paired(trainer: Sequence["torch.Tensor"], rollout: Sequence[Sequence[float] | None]):
    if len(trainer) != len(rollout):
        raise ValueError(f"{len(trainer)} trainer log-prob rows but {len(rollout)} rollout rows")
    for i, (t, r) in enumerate(zip(trainer, rollout)):
        if r is None:
            yield i, t, None
            continue
        r_t = torch.as_tensor(r, dtype=torch.float32, device=t.device)
        if r_t.shape != t.shape:
            raise ValueError(f"sequence {i}: the engine gave {r_t.numel()} log-probs for "
                             f"{t.numel()} completion tokens")
        yield i, t.float(), r_t


def logp_mismatch(trainer: Sequence["torch.Tensor"],
                  rollout: Sequence[Sequence[float] | None]) -> Mismatch:
    """Mean absolute difference over the tokens of the sequences that have engine log-probs."""
    total, tokens, sequences = 0.0, 0, 0
    for _i, t, r in _paired(trainer, rollout):
        if r is None:
            continue
        total += float((t - r).abs().sum())
        tokens += int(t.numel())
        sequences += 1
    return Mismatch(total / tokens if tokens else 0.0, tokens, sequences)


def tis_weights(trainer: Sequence["torch.Tensor"], rollout: Sequence[Sequence[float] | None],
                cap: float) -> list["torch.Tensor"]:
    """Per-token min(exp(trainer - engine), cap) for each sequence; 1 where the engine gave none."""

    if cap <= 0:
        raise ValueError(f"rollout_is_cap {cap}: expected a positive cap")
    out: list[torch.Tensor] = []
    for _i, t, r in _paired(trainer, rollout):
        if r is None:
            out.append(torch.ones_like(t, dtype=torch.float32))
        else:
            out.append(torch.exp(t - r).clamp(max=cap))
    return out
