"""What the update trains on: a trajectory, and trajectories packed into micro-batches.

The one data type shared by the GRPO update (`codea1.grpo`) and the log-probability
helpers (`codea1.logprobs`): both read it, neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch


@dataclass
class Trajectory:
    """One trajectory to train on: prompt tokens, response tokens, its scalar advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    rollout_logprobs: list[float] | None = None  # the rollout engine's, where it reports them


@dataclass
class MicroBatch:
    """Sequences packed into one row with no padding (position ids restart per sequence).

    `targets` are the response tokens in order; `keep` marks the positions whose logits
    predict them; `seq_index[k]` says which sequence target k belongs to.
    """

    input_ids: torch.Tensor      # [1, L]
    position_ids: torch.Tensor   # [1, L]
    keep: torch.Tensor           # [1, L] bool
    targets: torch.Tensor        # [T]
    advantages: torch.Tensor     # [T]
    seq_index: torch.Tensor      # [T]
    members: list[int] = field(default_factory=list)  # indices into the original list
    # shared-prompt rows (codea1.logprobs): who may attend to whom, and the position
    # predicting each target (used instead of `keep`)
    attention_mask: torch.Tensor | None = None  # [1, 1, L, L] bool
    logit_index: torch.Tensor | None = None     # [T]


def pack_micro_batches(seqs: Sequence[Trajectory], token_budget: int, pack: bool = True) -> list[MicroBatch]:
    """Greedy, order-preserving packing of sequences into rows of at most `token_budget`.

    A sequence longer than the budget gets a row of its own; with `pack=False` every
    sequence does. Sequences with an empty response carry no tokens to train and are
    skipped.
    """
    if not pack:
        token_budget = 0
    rows: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, s in enumerate(seqs):
        if not s.completion_ids:
            continue
        n = len(s.prompt_ids) + len(s.completion_ids)
        if current and used + n > token_budget:
            rows.append(current)
            current, used = [], 0
        current.append(i)
        used += n
    if current:
        rows.append(current)

    batches = []
    for row in rows:
        ids, pos, keep, tgt, adv, idx = [], [], [], [], [], []
        for i in row:
            s = seqs[i]
            if not s.prompt_ids:
                raise ValueError(f"sequence {i} has an empty prompt; nothing predicts its first token")
            full = list(s.prompt_ids) + list(s.completion_ids)
            ids.extend(full)
            pos.extend(range(len(full)))
            p = len(s.prompt_ids)
            # the logit at position t predicts token t + 1: positions p-1 .. len-2
            keep.extend([False] * (p - 1) + [True] * len(s.completion_ids) + [False])
            tgt.extend(s.completion_ids)
            adv.extend([s.advantage] * len(s.completion_ids))
            idx.extend([i] * len(s.completion_ids))
        batches.append(
            MicroBatch(
                input_ids=torch.tensor([ids], dtype=torch.long),
                position_ids=torch.tensor([pos], dtype=torch.long),
                keep=torch.tensor([keep], dtype=torch.bool),
                targets=torch.tensor(tgt, dtype=torch.long),
                advantages=torch.tensor(adv, dtype=torch.float32),
                seq_index=torch.tensor(idx, dtype=torch.long),
                members=list(row),
            )
        )
    return batches
